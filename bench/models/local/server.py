"""The llama.cpp server process behind a local model: one child on 127.0.0.1 that cannot outlive us
(``PR_SET_PDEATHSIG`` from one spawner thread, an ``atexit`` hook, its own session)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from bench.core.errors import LocalModelError
from bench.core.http_get import get
from bench.core.processes import die_with_parent
from bench.models.local._launch import HOST, child_env, require_server_packages, server_command
from bench.models.local.weights import cache_dir, identity, model_file, parse

STOP_GRACE_S = 5.0
LOG_TAIL_CHARS = 3000
KEEP_LOGS = 20

_T = TypeVar("_T")


@dataclass(frozen=True)
class LocalEndpoint:
    """Where a local model answers: what to pass as api_base and model, and what to key caches on."""

    api_base: str  # "http://127.0.0.1:P/v1"
    served_model: str  # the alias to send as "model" (the name after "local/")
    identity: str  # stable id of the weights, e.g. "local:gemma-3-270m:<size>:<version>"; never the port


def _choose_port(port: int | None) -> int:
    """Return ``port`` if it is usable, a free one if None; raise LocalModelError if it is taken."""
    if port is not None and not 1 <= port <= 65535:
        raise LocalModelError(f"port {port} is not a valid TCP port (1-65535)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        if port is not None:  # probed like uvicorn binds: with SO_REUSEADDR
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port or 0))  # 0: a loopback port free right now (the kernel's choice)
        except OSError:
            raise LocalModelError(f"port {port} on {HOST} is already in use; pass another --port or omit it") from None
        return probe.getsockname()[1]


class _SpawnThread:
    """Runs every server ``Popen`` on one long-lived thread (PR_SET_PDEATHSIG fires when the forking thread exits)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], _T], abandon: Callable[[_T], None] | None = None) -> _T:
        """Return ``fn()`` as run on the spawner thread; an interrupted caller's result goes to ``abandon``."""
        future: Future[_T] = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="bench-local-spawner", daemon=True)
                self._thread.start()
        self._jobs.put((fn, future))
        try:
            return future.result()
        except BaseException:
            if abandon is not None:
                future.add_done_callback(lambda done: done.exception() is None and abandon(done.result()))
            raise

    def _run(self) -> None:
        while True:
            fn, future = self._jobs.get()
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed back to the caller
                future.set_exception(exc)


_SPAWNER = _SpawnThread()


def _new_log_path(name: str, port: int) -> Path:
    """Return a fresh log file path under ``cache_dir()/logs/``, pruning all but the newest logs."""
    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    old = sorted(logs.glob("local-*.log"), key=lambda p: p.stat().st_mtime)
    for stale in old[: max(0, len(old) - KEEP_LOGS)]:
        stale.unlink(missing_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.")[-60:] or "model"
    return logs / f"local-{safe}-{port}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def log_tail(path: Path | None, limit: int = LOG_TAIL_CHARS) -> str:
    """Return the last ``limit`` characters of a server log (what explains a failed start)."""
    if path is None or not path.exists():
        return "(no log)"
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - limit))
        return handle.read().decode("utf-8", "replace").strip() or "(empty log)"


def _spawn(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start the server process (own session, dies with us, output to ``log_path``) and return it."""
    parent = os.getpid()

    def popen() -> subprocess.Popen[bytes]:
        with log_path.open("ab") as log:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=child_env(), start_new_session=True, close_fds=True,
                                    preexec_fn=die_with_parent(parent, signal.SIGKILL))

    return _SPAWNER.call(popen, abandon=_kill_now)


def _kill_now(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a server process nobody owns (its starter was interrupted) and reap it."""
    _signal_group(proc, signal.SIGKILL)
    proc.wait()


def model_ids(api_base: str, timeout_s: float) -> list[str]:
    """Return the model ids listed by ``<api_base>/models``; raises OSError/ValueError if it can't."""
    status, _, body = get(f"{api_base}/models", timeout_s=timeout_s)
    if status != 200:
        raise OSError(f"{api_base}/models answered HTTP {status}")
    payload = json.loads(body)
    return [str(item.get("id")) for item in payload.get("data", [])]


_LIVE: set[LocalServer] = set()
_LIVE_LOCK = threading.Lock()


class LocalServer:
    """One llama.cpp server process serving one local model on 127.0.0.1 (also a context manager)."""

    def __init__(self, model: str, port: int | None = None, n_ctx: int = 4096):
        self.model = model
        self.spec = parse(model)
        self.port = port
        self.n_ctx = n_ctx
        self.endpoint: LocalEndpoint | None = None
        self.log_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = os.getpid()
        self._lock = threading.RLock()

    @property
    def pid(self) -> int | None:
        """Return the server process id while it runs (None before start and after stop)."""
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        """Return whether the server process is running (it may still be loading)."""
        proc = self._proc
        return proc is not None and proc.poll() is None

    def start(self, timeout_s: float = 120.0) -> LocalEndpoint:
        """Start the server, wait until it answers, return its endpoint; LocalModelError (with its log) if not."""
        with self._lock:
            if self.alive() and self.endpoint is not None:
                return self.endpoint
            if self.n_ctx < 1:
                raise LocalModelError(f"n_ctx must be a positive number of tokens, not {self.n_ctx}")
            port = _choose_port(self.port)
            require_server_packages()
            path = model_file(self.model)
            endpoint = LocalEndpoint(f"http://{HOST}:{port}/v1", self.spec.name, identity(self.model))
            self.log_path = _new_log_path(self.spec.name, port)
            self._proc = _spawn(server_command(path, port, self.spec, self.n_ctx), self.log_path)
            with _LIVE_LOCK:
                _LIVE.add(self)
            try:
                self._wait_ready(endpoint, timeout_s)
            except BaseException:
                self.stop()
                raise
            self.endpoint = endpoint
            return endpoint

    def _wait_ready(self, endpoint: LocalEndpoint, timeout_s: float) -> None:
        """Return once our process answers ``/v1/models`` with our alias; raise if it dies or times out."""
        deadline = time.monotonic() + timeout_s
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                raise LocalModelError(f"the llama.cpp server for {self.model} exited (code {code}) before it answered; "
                                      f"log {self.log_path}:\n{log_tail(self.log_path)}")
            with contextlib.suppress(OSError, ValueError):
                ids = model_ids(endpoint.api_base, timeout_s=2.0)
                if endpoint.served_model in ids:
                    return
            if time.monotonic() > deadline:
                raise LocalModelError(f"the llama.cpp server for {self.model} did not answer {endpoint.api_base}/models"
                                      f" within {timeout_s:g} s; log {self.log_path}:\n{log_tail(self.log_path)}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server: SIGTERM its process group, wait up to 5 s, then SIGKILL. Idempotent."""
        with self._lock:
            proc, self._proc, self.endpoint = self._proc, None, None
            with _LIVE_LOCK:
                _LIVE.discard(self)
            if proc is None or os.getpid() != self._owner:
                return
            if proc.poll() is None:
                _signal_group(proc, signal.SIGTERM)
                try:
                    proc.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    _signal_group(proc, signal.SIGKILL)
                    proc.wait()

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.endpoint.api_base if self.endpoint else "stopped"
        return f"LocalServer({self.model!r}, {where}, pid={self.pid})"


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Send ``sig`` to the server's process group (it leads its own session), or to it alone."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def _stop_all() -> None:
    """Stop every server this process started (the atexit hook)."""
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for server in servers:
        with contextlib.suppress(Exception):
            server.stop()


atexit.register(_stop_all)
