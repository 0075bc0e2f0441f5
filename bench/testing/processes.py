"""What tests see of the processes they start: a free loopback port, a process tree, its listening sockets,
the line a server prints when it is ready, and a server stopped with its group."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil


def free_port() -> int:
    """Return a TCP port of 127.0.0.1 that nothing listens on now (a server started next may take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree(pid: int | None) -> list[psutil.Process]:
    """Return the process ``pid`` and its descendants, itself first (empty when it is gone or ``pid`` is None)."""
    if pid is None:
        return []
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def listening(procs: list[psutil.Process]) -> dict[tuple[str, int], int]:
    """Return {(address, port): pid} of every TCP socket these processes listen on (those gone are skipped)."""
    found = {}
    for proc in procs:
        try:
            for conn in proc.net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN:
                    found[(conn.laddr.ip, conn.laddr.port)] = proc.pid
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def read_line(proc: subprocess.Popen, pattern: str, timeout_s: float) -> tuple[str, str]:
    """Return (the first line of ``proc``'s stdout matching ``pattern``, everything read) within ``timeout_s``, or
    ("", everything read). A thread keeps reading after the match, so the process never blocks on a full pipe."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in iter(proc.stdout.readline, "")], daemon=True).start()
    seen, deadline = "", time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=min(left, 1.0))
        except queue.Empty:
            if proc.poll() is not None and lines.empty():
                break
            continue
        seen += line
        if re.search(pattern, line):
            return line, seen
    return "", seen


def fetch_when_up(url: str, proc: subprocess.Popen, timeout_s: float, log: Path | None = None) -> bytes:
    """Return the body of ``url`` once ``proc`` answers it; AssertionError (``log``'s tail) if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                return reply.read()
        except OSError as err:
            if proc.poll() is not None or time.monotonic() > deadline:
                said = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
                ended = proc.poll() is not None
                why = f"exited ({proc.returncode})" if ended else f"did not answer in {timeout_s:.0f}s"
                raise AssertionError(f"the server of {url} {why}: {err}\n{said}") from err
        time.sleep(0.5)  # polling a server another process starts


@contextmanager
def stopped_at_exit(proc: subprocess.Popen, grace_s: float = 30) -> Iterator[subprocess.Popen]:
    """Yield ``proc`` (its own session); on leaving, SIGTERM its group, SIGKILL it after ``grace_s``, reap it."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace_s)
