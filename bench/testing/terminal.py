"""A ``bench`` command on a pseudo-terminal of its own (pexpect), as a user runs it: Ctrl-C typed, so the terminal
sends SIGINT to its whole foreground process group. On leaving, one still running is killed with its descendants."""

from __future__ import annotations

import codecs
import os
import re
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import pexpect
import psutil

from bench.testing.grids import ROOT, env
from bench.testing.processes import tree


class Terminal:
    """``python -m bench ARGS`` on a pty, in :func:`bench.testing.grids.env`; ``output``: all it printed so far."""

    def __init__(self, tmp_path: Path, *args: str, **extra: str) -> None:
        self.child = pexpect.spawn(sys.executable, ["-m", "bench", *args], cwd=str(ROOT), env=env(tmp_path, **extra),
                                   dimensions=(50, 200), timeout=None)
        self.output = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:  # the pty itself, not pexpect's reader: only the test's thread asks if the child lives
        decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        with suppress(OSError):  # EIO once no process holds the terminal any more
            while chunk := os.read(self.child.child_fd, 4096):
                self.output += decode(chunk)

    def wait_for(self, check: Any, what: str, timeout_s: float = 180) -> Any:
        """Return ``check()`` (a pattern: its match) once truthy; fail if the command ends or time runs out."""
        test = (lambda: re.search(check, self.output, re.M)) if isinstance(check, str) else check
        deadline = time.monotonic() + timeout_s
        while not (found := test()):
            assert self.child.isalive() and time.monotonic() < deadline, f"no {what}:\n{self.output[-3000:]}"
            time.sleep(0.02)  # polling a counter of another process
        return found

    def press_ctrl_c(self) -> float:
        """Type the terminal's interrupt character, as a user presses Ctrl-C; return when (``time.time()``)."""
        at = time.time()
        self.child.sendintr()
        return at

    def wait(self, timeout_s: float = 180) -> int:
        """Wait for the command to end; return its exit code (128 + N when signal N ended it)."""
        deadline = time.monotonic() + timeout_s
        while self.child.isalive():
            assert time.monotonic() < deadline, f"still running after {timeout_s:.0f}s:\n{self.output[-3000:]}"
            time.sleep(0.05)  # polling the child's exit (pexpect's wait has no timeout)
        self._reader.join(10)
        self.child.close()
        return self.child.exitstatus if self.child.signalstatus is None else 128 + self.child.signalstatus

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.child.isalive():
            for proc in reversed(tree(self.child.pid)):
                with suppress(psutil.NoSuchProcess):
                    proc.kill()
        with suppress(Exception):
            self.child.close(force=True)
