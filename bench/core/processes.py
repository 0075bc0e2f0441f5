"""Child processes that never outlive bench: the parent-death signal, and whether a pid is alive.

Every server bench starts (the embedded model, MLflow's UI, papermill kernels) is started with
:func:`die_with_parent` as its ``preexec_fn``, so a SIGKILLed driver leaves no process behind.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def _libc_prctl() -> Callable[..., int] | None:
    """Return libc's prctl, resolved in the parent (so the forked child runs no loader code), or None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> Callable[[], None]:
    """Return a ``preexec_fn`` asking the kernel to send ``sig`` to the child when its parent thread dies.

    If the parent is already gone by the time the child runs it (a kill between fork and prctl),
    the child exits at once instead of starting an orphan. Off Linux only the second check applies.
    """
    prctl = _libc_prctl()

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def pid_alive(pid: int) -> bool:
    """Return whether a process with this pid exists (a pid owned by another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
