"""``--cluster local:N``: a Dask cluster on this machine that no neighbour can enter, and that serves no web page.

N nannied workers on 127.0.0.1, mutual TLS under a certificate made for this sweep, no secret in their
environment and no HTTP server (docs/cluster.md)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.processes import die_with_parent, remove_stale_folders
from bench.sweep.executions import CLUSTER_FOLDER as FOLDER_PREFIX  # + the driver's pid: certificate, logs

QUIET_SCHEDULER = "bench.sweep.cluster.quiet_dask.QuietScheduler"  # by name: Dask imports them (no HTTP server)
QUIET_WORKER = "bench.sweep.cluster.quiet_dask.QuietWorker"
READY_S = 120.0  # how long N workers may take to register (a loaded 2-core machine starts them slowly)
THREADS = 2  # executions at once per worker (each is a papermill kernel: threads mostly wait)


class PrivateCluster:
    """``with PrivateCluster(n, secret_names) as c:`` a TLS scheduler at ``c.address`` with ``n`` workers;
    ``c.client`` is connected with the sweep's certificate; ``c.workers`` are the worker processes."""

    def __init__(self, n_workers: int, secret_names: list[str]):
        self.n_workers, self.secret_names = n_workers, secret_names
        from distributed.security import Security  # noqa: PLC0415 (distributed: 1 s of imports, the `cluster` extra)

        self.security = Security.temporary()  # require_encryption=True: tls:// only, both ends authenticated
        self.cluster: Any = None
        self.client: Any = None
        self.workers: list[subprocess.Popen] = []
        self.folder: Path | None = None

    @property
    def address(self) -> str:
        return str(self.cluster.scheduler_address) if self.cluster is not None else ""

    def start(self) -> "PrivateCluster":
        from distributed import Client, SpecCluster  # noqa: PLC0415 (distributed: the `cluster` extra)

        remove_stale_folders(FOLDER_PREFIX)  # what a killed driver left: its certificate, its workers' logs
        self.folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))  # 0700: this user only
        options = {"host": "127.0.0.1", "port": 0, "protocol": "tls://", "security": self.security,
                   "dashboard": False, "dashboard_address": None}
        self.cluster = SpecCluster(scheduler={"cls": QUIET_SCHEDULER, "options": options}, workers={},
                                   security=self.security, silence_logs=False, name="bench-local")
        files = self._write_certificate()
        for i in range(self.n_workers):
            self.workers.append(self._spawn(f"local-{i + 1}", files))
        self.client = Client(self.cluster, security=self.security)
        self._wait_for_workers()
        return self

    def close(self, now: bool = False) -> None:
        """Stop the client, the workers (by PID: SIGTERM, then SIGKILL; ``now``: SIGKILL, their graceful end takes
        8 s) and the scheduler; remove the folder."""
        for thing in (self.client, self.cluster):
            if thing is not None:
                with contextlib.suppress(Exception):  # already gone
                    thing.close()
        for proc in self.workers:
            if proc.poll() is None:
                proc.kill() if now else proc.terminate()
        for proc in self.workers:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.client = self.cluster = self.folder = None

    def _write_certificate(self) -> tuple[str, str, str]:
        """Write the sweep's certificate and key (0600, in the 0700 folder); return (ca file, certificate, key)."""
        assert self.folder is not None
        paths = []
        for name, text in (("ca.pem", self.security.tls_ca_file), ("worker.pem", self.security.tls_worker_cert),
                           ("worker.key", self.security.tls_worker_key)):
            path = self.folder / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            paths.append(str(path))
        return paths[0], paths[1], paths[2]

    def _spawn(self, name: str, files: tuple[str, str, str]) -> subprocess.Popen:
        """Start one ``dask worker`` (and its nanny), without any secret in its environment; it dies with us."""
        assert self.folder is not None
        env = {k: v for k, v in os.environ.items() if k not in self.secret_names}
        cmd = [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--host", "127.0.0.1",
               "--nthreads", str(THREADS), "--no-dashboard", "--name", name, "--memory-limit", "0",
               "--worker-class", QUIET_WORKER, "--local-directory", str(self.folder / name),
               "--tls-ca-file", files[0], "--tls-cert", files[1], "--tls-key", files[2]]
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 - the process holds it; closed at exit
        try:
            return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=self.folder, preexec_fn=die_with_parent(os.getpid(), signal.SIGTERM),
                                    start_new_session=True)  # a Ctrl-C on the terminal reaches the driver alone
        finally:
            log.close()

    def _wait_for_workers(self) -> None:
        deadline = time.monotonic() + READY_S
        while len(self.client.scheduler_info(n_workers=-1)["workers"]) < self.n_workers:
            if dead := [p for p in self.workers if p.poll() is not None]:
                raise BenchError(f"--cluster local:{self.n_workers}: a dask worker exited with {dead[0].returncode} "
                                 f"before joining: {self._log_tail(dead[0])}")
            if time.monotonic() > deadline:
                raise BenchError(f"--cluster local:{self.n_workers}: the workers did not join in {READY_S:.0f}s")
            time.sleep(0.1)  # polling a readiness condition (workers registering with the scheduler)

    def _log_tail(self, proc: subprocess.Popen) -> str:
        name = proc.args[proc.args.index("--name") + 1]  # type: ignore[union-attr]
        try:
            return (self.folder / f"{name}.log").read_text()[-600:].strip()  # type: ignore[operator]
        except OSError:
            return "(no log)"
