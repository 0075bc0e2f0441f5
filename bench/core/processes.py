"""Child processes that never outlive bench: the parent-death signal, whether a pid is alive, dead ones' folders.
Every server bench starts uses :func:`die_with_parent` as its ``preexec_fn``."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import stat
import sys
import tempfile
from collections.abc import Callable

from bench.core.errors import BenchError

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
    """Return a ``preexec_fn`` making the child get ``sig`` when its parent thread dies (or exit if it is gone)."""
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


def remove_stale_folders(prefix: str, socket_name: str = "") -> list[str]:
    """Remove the folders ``<tmp>/<prefix><pid>-*`` this user's dead processes left; return their paths. One
    without a pid goes only if nothing listens on its ``socket_name``; symlinks never."""
    removed = []
    for tmp in socket_bases():
        try:
            names = [n for n in os.listdir(tmp) if n.startswith(prefix)]
        except OSError:
            continue
        removed += _remove_stale(tmp, names, prefix, socket_name)
    return removed


def _remove_stale(tmp: str, names: list[str], prefix: str, socket_name: str) -> list[str]:
    removed = []
    for name in names:
        path = os.path.join(tmp, name)
        pid, sep, _rest = name[len(prefix):].partition("-")
        if sep and pid.isdigit():
            stale = int(pid) != os.getpid() and not pid_alive(int(pid))
        else:
            stale = bool(socket_name) and _nobody_listens(os.path.join(path, socket_name))
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stale and stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _nobody_listens(path: str) -> bool:
    """Return whether ``path`` is a unix socket file that refuses connections (its server is dead)."""
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return False
        with socket.socket(socket.AF_UNIX) as probe:
            probe.connect(path)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


SOCKET_PATH_MAX = 107  # the bytes of a Unix socket's path on Linux (sockaddr_un.sun_path, less its NUL)


def socket_bases() -> list[str]:
    """Return where bench makes its private folders, in order of preference: the temporary folder, then (for the
    folders that hold Unix sockets, when its path is too long) $XDG_RUNTIME_DIR and /tmp."""
    found = []
    for base in (tempfile.gettempdir(), os.environ.get("XDG_RUNTIME_DIR"), "/tmp"):
        if base and base not in found and os.path.isdir(base):
            found.append(base)
    return found


def socket_base(below: int) -> str:
    """Return the first of ``socket_bases`` this user can write to where a Unix socket ``below`` bytes further down
    still fits in a socket path (a long TMPDIR would leave a server unable to bind)."""
    for base in socket_bases():
        if len(os.fsencode(base)) + below <= SOCKET_PATH_MAX and os.access(base, os.W_OK | os.X_OK):
            return base
    raise BenchError(f"no folder for bench's Unix sockets: the temporary folder {tempfile.gettempdir()} has too long "
                     f"a path (a socket's path holds at most {SOCKET_PATH_MAX} bytes) and neither $XDG_RUNTIME_DIR nor "
                     f"/tmp can be written to; set TMPDIR to a shorter folder you can write to")
