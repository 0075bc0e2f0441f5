"""A throwaway PostgreSQL server on 127.0.0.1 for tests of the team tracking server: Debian's ``postgresql`` from
a temporary folder, trust authentication, run as ``postgres`` when we are root, stopped by its PID at exit."""

from __future__ import annotations

import atexit
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from bench.testing.processes import free_port

DEBIAN_BINARIES = "/usr/lib/postgresql/*/bin"
NEEDED = ("initdb", "pg_ctl", "postgres", "pg_isready", "createdb")
SYSTEM_USER = "postgres"  # created by Debian's postgresql-common
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
START_ATTEMPTS = 3  # a free port can be taken between choosing it and the server binding it


class PostgresUnavailable(RuntimeError):
    """PostgreSQL's binaries are missing, or the server did not start; the message says what to do."""


def _version(bindir: str) -> tuple[int, ...]:
    match = re.search(r"/postgresql/([\d.]+)/bin$", bindir)
    return tuple(int(p) for p in match.group(1).split(".") if p) if match else ()


def find_binaries() -> dict[str, str]:
    """Return {name: path} of PostgreSQL's server binaries: Debian's newest version, else those on PATH."""
    for bindir in sorted(glob.glob(DEBIAN_BINARIES), key=_version, reverse=True):
        paths = {name: os.path.join(bindir, name) for name in NEEDED}
        if all(os.access(p, os.X_OK) for p in paths.values()):
            return paths
    found = {name: shutil.which(name) for name in NEEDED}
    if all(found.values()):
        return found  # type: ignore[return-value]
    missing = ", ".join(n for n, p in found.items() if not p)
    raise PostgresUnavailable(
        f"PostgreSQL's server binaries are missing ({missing} not under {DEBIAN_BINARIES} nor on PATH): "
        f"install Debian's package as root: apt-get install postgresql (`make postgres` does it)")


def _as_postgres() -> list[str]:
    """Return the command prefix that runs a program as the ``postgres`` user when we are root, else []."""
    if os.geteuid() != 0:
        return []
    setpriv, runuser = shutil.which("setpriv"), shutil.which("runuser")
    if setpriv:  # execs the program itself: the PID we start is the postmaster's
        return [setpriv, f"--reuid={SYSTEM_USER}", f"--regid={SYSTEM_USER}", "--init-groups", "--"]
    if runuser:
        return [runuser, "-u", SYSTEM_USER, "--"]
    raise PostgresUnavailable("running as root, and neither setpriv nor runuser is installed to run PostgreSQL "
                              f"as the {SYSTEM_USER!r} user (PostgreSQL refuses root): apt-get install util-linux")


class LoopbackPostgres:
    """A PostgreSQL server on 127.0.0.1 for the length of a ``with`` block (``uri``: trust, no password)."""

    def __init__(self, database: str = "mlflow", user: str = "bench", timeout_s: float = READY_TIMEOUT_S):
        self.database, self.user, self.timeout_s = database, user, timeout_s
        self.host = "127.0.0.1"
        self.port = 0
        self.folder: Path | None = None
        self.proc: subprocess.Popen | None = None
        self._bin: dict[str, str] = {}
        self._prefix: list[str] = []

    @property
    def uri(self) -> str:
        """The libpq URI of the database (what ``bench tracking-server --backend-store-uri`` takes)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}"

    @property
    def pid(self) -> int | None:
        """The postmaster's PID while the server runs."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    @property
    def data_dir(self) -> Path:
        assert self.folder is not None, "not started"
        return self.folder / "data"

    @property
    def log_path(self) -> Path:
        assert self.folder is not None, "not started"
        return self.folder / "postgres.log"

    def __enter__(self) -> LoopbackPostgres:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        """Create the cluster, start the server and the database; PostgresUnavailable, nothing left, if that fails."""
        self._bin, self._prefix = find_binaries(), _as_postgres()
        self.folder = Path(tempfile.mkdtemp(prefix="bench-postgres-"))
        atexit.register(self.stop)  # a test that never reaches __exit__ still leaves no server behind
        try:
            self._initdb()
            for attempt in range(START_ATTEMPTS):
                if self._start_server(last=attempt == START_ATTEMPTS - 1):
                    break
            self._run([self._bin["createdb"], "-h", self.host, "-p", str(self.port), "-U", self.user,
                       self.database], as_postgres=False, what="createdb")
        except BaseException:
            self.stop()
            raise

    def _run(self, cmd: list[str], *, as_postgres: bool = True, what: str) -> None:
        prefix = self._prefix if as_postgres else []
        out = subprocess.run([*prefix, *cmd], cwd=self.folder, stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=120)
        if out.returncode != 0:
            raise PostgresUnavailable(f"{what} failed ({out.returncode}): {(out.stderr or out.stdout).strip()[-2000:]}")

    def _initdb(self) -> None:
        assert self.folder is not None
        if self._prefix:  # the postgres user owns the folder (its socket and log live there too)
            shutil.chown(self.folder, user=SYSTEM_USER, group=SYSTEM_USER)
        self._run([self._bin["initdb"], "-D", str(self.data_dir), "-U", self.user, "--auth=trust", "-E", "UTF8",
                   "--no-locale", "--no-sync"], what="initdb")

    def _start_server(self, last: bool) -> bool:
        """Start the postmaster on a free port and wait for it; return False when that port was taken meanwhile."""
        assert self.folder is not None
        self.port = free_port()
        settings = {"listen_addresses": self.host, "port": str(self.port), "unix_socket_directories": str(self.folder),
                    "fsync": "off", "full_page_writes": "off", "logging_collector": "off"}
        cmd = [*self._prefix, self._bin["postgres"], "-D", str(self.data_dir)]
        for key, value in settings.items():
            cmd += ["-c", f"{key}={value}"]
        with open(self.log_path, "wb") as log:  # root opens it; the server writes through the inherited fd
            self.proc = subprocess.Popen(cmd, cwd=self.folder, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         start_new_session=True)  # its own process group: backends stop with it
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log_text = self.log_path.read_text(errors="replace")
                if "Address already in use" in log_text and not last:
                    self.proc = None
                    return False
                raise PostgresUnavailable(f"PostgreSQL exited ({self.proc.returncode}) before accepting "
                                          f"connections on {self.host}:{self.port}: {log_text.strip()[-2000:]}")
            ready = subprocess.run([self._bin["pg_isready"], "-q", "-h", self.host, "-p", str(self.port), "-U",
                                    self.user, "-d", "postgres", "-t", "2"], stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=30)
            if ready.returncode == 0:
                return True
            time.sleep(0.1)  # pg_isready answered "not yet" at once (starting up, or nothing listening yet)
        log_text = self.log_path.read_text(errors="replace")
        raise PostgresUnavailable(f"PostgreSQL did not accept connections on {self.host}:{self.port} within "
                                  f"{self.timeout_s:.0f}s; its log: {log_text.strip()[-2000:]}")

    def stop(self) -> None:
        """Stop the server (fast shutdown, then SIGKILL to its process group) and remove the folder; idempotent."""
        atexit.unregister(self.stop)
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with suppress(subprocess.TimeoutExpired):
                subprocess.run([*self._prefix, self._bin["pg_ctl"], "stop", "-D", str(self.data_dir), "-m", "fast",
                                "-w", "-t", str(int(STOP_TIMEOUT_S))], cwd=self.folder, stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=STOP_TIMEOUT_S + 10)
            with suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_TIMEOUT_S)
        if proc is not None and proc.poll() is None:
            with suppress(ProcessLookupError, PermissionError):  # it did not stop: SIGKILL its process group
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


__all__ = ["LoopbackPostgres", "PostgresUnavailable", "find_binaries"]
