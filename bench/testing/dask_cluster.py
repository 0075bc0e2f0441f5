"""A real Dask cluster on loopback for tests and benchmarks: a scheduler and N workers, each its own process bound
to 127.0.0.1 and stopped by its PID. Workers have no nanny (one killed stays dead); ``tls=(ca, cert, key)``: TLS."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path


def _dask(*args: str) -> list[str]:
    return [sys.executable, "-m", "distributed.cli.dask_" + args[0], *args[1:]]


class LoopbackDaskCluster:
    """``with LoopbackDaskCluster(2) as c:`` a scheduler at ``c.address`` and two workers (``c.workers``: Popen)."""

    def __init__(self, n_workers: int = 2, nthreads: int = 2, *, env: dict[str, str] | None = None,
                 ready_s: float = 120.0, tls: tuple[str, str, str] | None = None):
        self.n_workers, self.nthreads, self.ready_s, self.tls = n_workers, nthreads, ready_s, tls
        self.env = {**os.environ, **(env or {})}
        self.folder = Path(tempfile.mkdtemp(prefix="bench-dask-"))
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.address = ""

    def __enter__(self) -> "LoopbackDaskCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        sched_file = self.folder / "scheduler.json"
        self.scheduler = self._spawn(_dask("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                           "--scheduler-file", str(sched_file), *self._tls_args()), "scheduler")
        deadline = time.monotonic() + self.ready_s
        while not self.address:
            if self.scheduler.poll() is not None:
                raise RuntimeError(f"dask scheduler exited with {self.scheduler.returncode}: {self._log('scheduler')}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"dask scheduler not ready in {self.ready_s:.0f}s: {self._log('scheduler')}")
            try:
                self.address = json.loads(sched_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                self._pause()
        for i in range(self.n_workers):
            self.add_worker(f"w{i + 1}")
        self.wait_for_workers(self.n_workers)

    def add_worker(self, name: str, env: dict[str, str] | None = None, *extra: str,
                   wrap: list[str] | None = None) -> subprocess.Popen:
        """Start one more worker (``env``: its own variables; ``wrap``: a command it runs under); return it."""
        cmd = _dask("worker", self.address, "--host", "127.0.0.1", "--nthreads", str(self.nthreads), "--no-nanny",
                    "--no-dashboard", "--name", name, "--memory-limit", "0", "--local-directory",
                    str(self.folder / name), *self._tls_args(), *extra)
        proc = self._spawn([*(wrap or []), *cmd], name, env)
        self.workers.append(proc)
        return proc

    def wait_for_workers(self, n: int) -> None:
        """Wait until ``n`` workers are registered with the scheduler (a worker that exits is an error)."""
        from distributed import Client  # noqa: PLC0415 (distributed: 1 s of imports, only cluster tests need it)

        with Client(self.address, timeout="60s", security=self.security()) as client:
            deadline = time.monotonic() + self.ready_s
            while len(client.scheduler_info(n_workers=-1)["workers"]) < n:
                if dead := [p for p in self.workers if p.poll() is not None]:
                    raise RuntimeError(f"a dask worker exited with {dead[0].returncode}: {self._log(dead[0].args)}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{n} dask workers not ready in {self.ready_s:.0f}s")
                self._pause()

    def stop(self) -> None:
        """Stop every worker, then the scheduler, by PID (SIGTERM, then SIGKILL after 10 s)."""
        for proc in [*self.workers, self.scheduler]:
            if proc is not None and proc.poll() is None:
                _signal(proc, signal.SIGTERM)
        for proc in [*self.workers, self.scheduler]:
            if proc is None:
                continue
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _signal(proc, signal.SIGKILL)
                proc.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)  # its logs and the workers' scratch space

    def security(self) -> object:
        """Return the distributed Security a client of this cluster needs (None: plain TCP)."""
        if self.tls is None:
            return None
        from distributed.security import Security  # noqa: PLC0415

        ca, cert, key = self.tls
        return Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)

    def _tls_args(self) -> list[str]:
        if self.tls is None:
            return []
        ca, cert, key = self.tls
        return ["--protocol", "tls", "--tls-ca-file", ca, "--tls-cert", cert, "--tls-key", key]

    def _spawn(self, cmd: list[str], name: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process's end
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**self.env, **(env or {})},
                                start_new_session=True, cwd=self.folder)

    def _log(self, name: object) -> str:
        with suppress(OSError):
            return (self.folder / f"{name if isinstance(name, str) else 'scheduler'}.log").read_text()[-2000:]
        return ""

    @staticmethod
    def _pause() -> None:
        time.sleep(0.1)  # polling a readiness condition (a file appearing, workers registering)


def _signal(proc: subprocess.Popen, sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the process and anything it started (a worker's kernels)


def write_certificate(folder: Path) -> tuple[str, str, str]:
    """Write a fresh self-signed CA, certificate and key into ``folder`` (0600); return their paths (ca, cert, key)."""
    from distributed.security import Security  # noqa: PLC0415

    made, paths = Security.temporary(), []
    for name, text in (("ca.pem", made.tls_ca_file), ("cert.pem", made.tls_client_cert),
                       ("key.pem", made.tls_client_key)):
        path = Path(folder) / name
        path.write_text(text)
        path.chmod(0o600)
        paths.append(str(path))
    return paths[0], paths[1], paths[2]
