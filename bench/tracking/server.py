"""`bench tracking-server`: a team's MLflow tracking server on a PostgreSQL backend store, in the foreground.

A password in the backend URI is never printed nor put on a command line (it goes in ``PGPASSWORD``).
:class:`TrackingServer` is the same server as a context manager."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from bench.core.addresses import is_loopback
from bench.core.errors import BenchError
from bench.core.processes import die_with_parent
from bench.core.secrets import add_secret, redact
from bench.tracking.ui import STORE_ENV, _raise_stopped, _stderr_fd, _Stopped, server_env, stop, wait_answering

READY_TIMEOUT_S = float(os.environ.get("BENCH_TRACKING_SERVER_TIMEOUT_S", "300"))  # first start migrates the schema
CONNECT_TIMEOUT_S = 5  # libpq's connect_timeout for the check before starting (whole seconds)
SCHEMES = ("postgresql", "postgresql+psycopg2")  # accepted; libpq gets postgresql://, mlflow postgresql+psycopg2://
WILDCARDS = ("0.0.0.0", "::", "")  # every interface: probed on loopback, shown by this machine's name


class _Backend:
    """The parts of a PostgreSQL URI that messages name, and the URI without its password."""

    def __init__(self, uri: str):
        try:
            parts = urlsplit(uri.strip())
            port = parts.port
        except ValueError as err:
            raise BenchError(f"--backend-store-uri {redact(uri)!r} is not a valid URI ({err}): write "
                             f"postgresql://USER[:PASSWORD]@HOST:PORT/DATABASE") from None
        if parts.scheme not in SCHEMES:
            hint = " (SQLAlchemy needs postgresql://, not postgres://)" if parts.scheme == "postgres" else ""
            raise BenchError(f"--backend-store-uri {redact(uri)!r}: bench tracking-server needs a PostgreSQL "
                             f"backend store, postgresql://USER[:PASSWORD]@HOST:PORT/DATABASE{hint}")
        userinfo, _, hostport = parts.netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        query = parse_qsl(parts.query, keep_blank_values=True)
        in_query = [v for k, v in query if k == "password"]  # libpq's query form: ?password=…
        self.password = unquote(password) if password else (in_query[-1] if in_query else None)
        for secret in (password, self.password, *in_query):
            add_secret(secret)
        self.host = parts.hostname or "localhost"
        self.port = port or 5432
        self.database = parts.path.lstrip("/") or unquote(user) or "postgres"
        self.user = unquote(user) if user else None
        netloc = f"{user}@{hostport}" if user else hostport
        # what mlflow gets: psycopg2 named (SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3), no password
        rest = urlencode([(k, v) for k, v in query if k != "password"])
        self.uri = parts._replace(scheme="postgresql+psycopg2", netloc=netloc, query=rest).geturl()
        self.dsn = parts._replace(scheme="postgresql").geturl()  # what libpq connects with (the password included)
        self.shown = redact(uri)
        self.address = f"{self.host}:{self.port}"


def _advice(message: str, db: _Backend) -> str:
    """Return what to do about libpq's ``message``."""
    low = message.lower()
    if "connection refused" in low:
        return "nothing accepts connections there: start PostgreSQL, or fix the host and port in --backend-store-uri"
    if "could not translate host name" in low or "name or service not known" in low:
        return f"the host name {db.host!r} does not resolve: fix it in --backend-store-uri"
    if "timeout expired" in low or "timed out" in low:
        return (f"no answer within {CONNECT_TIMEOUT_S}s: check the host, the port and any firewall between this "
                f"machine and PostgreSQL")
    if "database" in low and "does not exist" in low:
        return f"create it first: createdb -h {db.host} -p {db.port} -U {db.user or 'USER'} {db.database}"
    if "role" in low and "does not exist" in low:
        return f"create the role (createuser -h {db.host} -p {db.port} {db.user}) or fix the user in the URI"
    if "password" in low or "authentication" in low or "pg_hba.conf" in low:
        return ("check the user and password in --backend-store-uri (or PGPASSWORD, ~/.pgpass) and that "
                "pg_hba.conf lets this machine in")
    return "check --backend-store-uri and that PostgreSQL runs there"


def check_backend(uri: str) -> _Backend:
    """Check that PostgreSQL at ``uri`` accepts a connection; raise one actionable BenchError if it does not."""
    db = _Backend(uri)
    try:
        import psycopg2  # noqa: PLC0415 (the 'cluster' extra's driver: only the team server needs it)
    except ImportError:
        raise BenchError("bench tracking-server needs PostgreSQL's driver psycopg2: pip install -e '.[cluster]' "
                         "(make setup installs it)") from None
    try:
        psycopg2.connect(db.dsn, connect_timeout=CONNECT_TIMEOUT_S).close()
    except psycopg2.Error as err:
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip() and not ln.strip().startswith("Is the")]
        reason = (lines[0] if lines else type(err).__name__).split(" failed: ", 1)[-1].replace("FATAL:  ", "")
        raise BenchError(f"cannot connect to PostgreSQL at {db.address} (database {db.database!r}, {db.shown}): "
                         f"{redact(reason)}; {_advice(reason, db)} (nothing was started)") from None
    return db


def _port_check(host: str, port: int) -> int:
    """Raise BenchError unless ``port`` (0: a free one) can be bound on ``host``; return the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except socket.gaierror:
            raise BenchError(f"--host {host!r} does not resolve to an address of this machine") from None
        except OSError as err:
            if port and err.errno == 98:  # EADDRINUSE
                raise BenchError(f"port {port} on {host} is in use: stop what listens there or choose another "
                                 f"port (--port)") from None
            raise BenchError(f"cannot listen on {host}:{port} ({err.strerror}): --host must be an address of "
                             f"this machine (127.0.0.1, 0.0.0.0 or one of its interfaces)") from None
        return s.getsockname()[1]


def _url_host(host: str, *, shown: bool) -> str:
    """Return how a URL names ``host``: a wildcard is this machine's name when shown, loopback when probed."""
    if host in WILDCARDS:
        host = socket.getfqdn() if shown else ("::1" if host == "::" else "127.0.0.1")
    return f"[{host}]" if ":" in host else host


def server_command(artifacts: str, host: str, port: int) -> list[str]:
    """Return the command line of ``mlflow server``: its backend store goes in the environment (see the module)."""
    return [sys.executable, "-m", "mlflow", "server", "--artifacts-destination", artifacts, "--serve-artifacts",
            "--host", host, "--port", str(port), "--workers", "1"]


def _artifacts(dest: str | Path) -> str:
    """Return the artifact destination as mlflow takes it: a URI as given, a folder created and made absolute."""
    text = str(dest)
    if "://" in text:
        return text
    folder = Path(text).expanduser().resolve()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BenchError(f"--artifacts-destination {folder}: cannot create it ({err.strerror}); choose a folder "
                         f"this machine can write (a shared filesystem for a team)") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BenchError(f"--artifacts-destination {folder}: not writable by this user; choose another folder")
    return str(folder)


class TrackingServer:
    """``mlflow server`` on PostgreSQL for the length of a ``with`` block (or between :meth:`start` and
    :meth:`stop`); :attr:`uri` is what ``MLFLOW_TRACKING_URI`` should say. ``port=None`` picks a free one."""

    def __init__(self, backend_uri: str, artifacts: str | Path, host: str = "127.0.0.1", port: int | None = 5000,
                 timeout_s: float = READY_TIMEOUT_S, log: IO[Any] | None = None):
        self.backend_uri, self.artifacts, self.host = backend_uri, artifacts, host
        self.port, self.timeout_s, self.log = port, timeout_s, log
        self.proc: subprocess.Popen | None = None
        self.backend: _Backend | None = None

    @property
    def uri(self) -> str:
        """``http://HOST:PORT`` of the server as other machines name it (this machine's name for 0.0.0.0)."""
        return f"http://{_url_host(self.host, shown=True)}:{self.port}"

    @property
    def local_url(self) -> str:
        """``http://HOST:PORT`` as this machine reaches it (loopback for a wildcard host)."""
        return f"http://{_url_host(self.host, shown=False)}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def __enter__(self) -> TrackingServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        """Check PostgreSQL, the artifacts and the port; start the server; return once /health answers."""
        self.backend = check_backend(self.backend_uri)
        artifacts = _artifacts(self.artifacts)
        self.port = _port_check(self.host, self.port or 0)
        env = {**server_env(), STORE_ENV: self.backend.uri}
        if self.backend.password:
            env["PGPASSWORD"] = self.backend.password  # off the command line: libpq reads it from there
        out = self.log if self.log is not None else _stderr_fd()
        self.proc = subprocess.Popen(server_command(artifacts, self.host, self.port), env=env,
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                     preexec_fn=die_with_parent(os.getpid()))
        try:
            wait_answering(self.proc, f"{self.local_url}/health", self.timeout_s, "MLflow's tracking server",
                           None if self.log is not None else "tracking-server")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server and every process it started (its process group); idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None:
            stop(proc)


def _announce(server: TrackingServer) -> None:
    print(f"MLflow tracking server: {server.uri}  (Ctrl-C stops it)", flush=True)
    print(f"on every worker, and wherever a sweep runs: export MLFLOW_TRACKING_URI={server.uri}", flush=True)
    if not is_loopback(server.host):
        print(f"tracking-server: note: listening on {server.host}: reachable from the network by anyone who can "
              f"reach port {server.port} (MLflow asks for no login); it accepts Host names localhost and private "
              f"addresses only: set MLFLOW_SERVER_ALLOWED_HOSTS for others", flush=True)


def tracking_server(backend_uri: str, artifacts: str | Path, host: str = "127.0.0.1", port: int = 5000) -> int:
    """Serve MLflow's tracking server on PostgreSQL in the foreground until Ctrl-C; return an exit code."""
    server = TrackingServer(backend_uri, artifacts, host=host, port=port)
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        print(f"tracking-server: checking PostgreSQL at {redact(backend_uri)} …", flush=True)
        server.start()
        _announce(server)
        code = server.proc.wait() if server.proc is not None else 0
        print(f"tracking-server: MLflow's tracking server exited ({code})", file=sys.stderr, flush=True)
        return code or 0
    except (KeyboardInterrupt, _Stopped):
        print("tracking-server: stopping MLflow's tracking server", flush=True)
        return 0
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
