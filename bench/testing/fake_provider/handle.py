"""The client-side handle on a fake provider: start its subprocess, configure it (urllib, never through a proxy),
read its stats, stop it by PID (at exit too; the server also exits once its parent is gone)."""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Any, Self

_LIVE: weakref.WeakSet[FakeProvider] = weakref.WeakSet()
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MODULE = "bench.testing.fake_provider"  # run as `python -m MODULE` (its __main__.py)
IMPORT_ROOT = Path(__file__).resolve().parents[3]  # the folder holding `bench`: `-m` there imports this copy


class FakeProvider:
    """A handle on a fake provider subprocess; ``latency_ms`` survives :meth:`reset`, ``config`` does not."""

    ADMIN_TIMEOUT_S = 5.0
    START_TIMEOUT_S = 20.0

    def __init__(self, latency_ms: float = 0, **config: Any) -> None:
        self.latency_ms = latency_ms
        self.config = config
        self.process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound TCP port (after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError("FakeProvider is not started; call .start() first")
        return self._port

    @property
    def url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:<port>/v1``: the ``api_base`` for chat and files/batches alike."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Self:
        """Spawn the server and wait (up to 20 s) for its port line."""
        if self.process is not None:
            return self
        cmd = [sys.executable, "-m", MODULE, "--port", "0", "--latency-ms", str(self.latency_ms),
               "--config", json.dumps(self.config), "--parent-pid", str(os.getpid())]
        with tempfile.TemporaryFile() as stderr:
            self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                                            cwd=IMPORT_ROOT)
            _LIVE.add(self)
            try:
                self._port = self._read_port(stderr)
            except BaseException:
                self.stop()
                raise
        return self

    def _read_port(self, stderr: Any) -> int:
        """Read the ``{"port": N}`` line, failing clearly if the process dies or stays silent."""
        assert self.process is not None and self.process.stdout is not None
        lines: queue.Queue[bytes] = queue.Queue()
        stdout = self.process.stdout
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=self.START_TIMEOUT_S)
        except queue.Empty:
            raise RuntimeError(f"fake provider printed no port within {self.START_TIMEOUT_S:.0f} s") from None
        try:
            return int(json.loads(line)["port"])
        except (ValueError, KeyError, TypeError):
            self.process.wait(timeout=5)
            stderr.seek(0)
            tail = stderr.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"fake provider failed to start (exit code {self.process.returncode}):\n"
                               f"{tail}") from None

    def stop(self) -> None:
        """SIGTERM the server, wait up to 5 s, then kill it."""
        process, self.process, self._port = self.process, None, None
        _LIVE.discard(self)
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def _admin(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        """One admin call; raises RuntimeError with the server's message on an HTTP error."""
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with _NO_PROXY.open(request, timeout=self.ADMIN_TIMEOUT_S) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"fake provider {path}: HTTP {exc.code}: {exc.read().decode()}") from None

    def configure(self, **cfg: Any) -> dict[str, Any]:
        """Merge config keys over the current config (``reset=True`` first restores defaults); returns it all."""
        return self._admin("POST", "/_admin/config", cfg)

    def stats(self) -> dict[str, Any]:
        """The server's counters (see ``GET /_admin/stats``; the Batch API's under ``"batches"``)."""
        return self._admin("GET", "/_admin/stats")

    def timeline(self) -> dict[str, Any]:
        """``GET /_admin/timeline``: each chat request since the reset as ``[model, start, end]`` under ``"spans"``."""
        return self._admin("GET", "/_admin/timeline")

    def reset(self) -> None:
        """Counters and config back to the defaults (the start-up latency included); every file and batch dropped."""
        self._admin("POST", "/_admin/reset", {})

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"FakeProvider({self.url if self._port is not None else 'not started'})"


@atexit.register
def _stop_stragglers() -> None:
    """Stop every provider still running when the interpreter exits."""
    for provider in list(_LIVE):
        provider.stop()

