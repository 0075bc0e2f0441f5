"""`bench ui`: MLflow's UI on a run's store, offline, on loopback, in the foreground (with LiteLLM's local
price map: a bare one blocks without internet)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench._prices import use_local_prices
from bench.core.errors import BenchError
from bench.core.http_get import get
from bench.core.paths import resolve, runs_root
from bench.core.processes import die_with_parent
from bench.core.secrets import redact

READY_TIMEOUT_S = float(os.environ.get("BENCH_UI_TIMEOUT_S", "300"))  # a cold start on 2 busy cores takes ~20 s
STOP_TIMEOUT_S = 10.0


def find_store(run: str | None = None) -> tuple[str, Path | None]:
    """Return (backend store URI, run folder or None) of ``run`` (a folder or a sweep name), else
    ``$MLFLOW_TRACKING_URI``, else the run folder whose ``mlflow.db`` changed last; BenchError if none."""
    if run is None and os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"], None
    if run is None:
        stores = sorted(runs_root().glob("*/mlflow.db"), key=lambda p: p.stat().st_mtime)
        if not stores:
            raise BenchError(f"no tracked run under {runs_root()}: run `bench sweep params/<grid>.yaml` "
                             f"(or `bench track runs/<sweep>`) first, or name a run: bench ui runs/<sweep>")
        folder = stores[-1].parent
    else:
        folder = Path(run).expanduser()
        if not folder.is_dir():
            folder = resolve(run) if resolve(run).is_dir() else runs_root() / run
    if not (folder / "mlflow.db").is_file():
        raise BenchError(f"{folder}: no MLflow store (mlflow.db) there; track the run first: bench track {folder}"
                         + (" (MLFLOW_TRACKING_URI is set: runs were logged there; `bench ui` without a run "
                            "opens it)" if os.environ.get("MLFLOW_TRACKING_URI") else ""))
    return f"sqlite:///{(folder / 'mlflow.db').resolve()}", folder.resolve()


def free_port() -> int:
    """Return a TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    """Return whether ``port`` can be bound on 127.0.0.1 now (as the server binds it: TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def server_env() -> dict[str, str]:
    """Return the UI server's environment: LiteLLM's local price map, no telemetry, no job runner."""
    env = dict(os.environ)
    use_local_prices(env)
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


STORE_ENV = "MLFLOW_BACKEND_STORE_URI"  # mlflow ui/server read their store from here: never from the command line


def server_command(folder: Path | None, port: int) -> list[str]:
    """Return the command line of MLflow's UI at 127.0.0.1:``port``; its store goes in ``STORE_ENV``, not argv."""
    cmd = [sys.executable, "-m", "mlflow", "ui", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    if folder is not None:  # anything the UI itself stores stays in the run folder, never in the cwd
        cmd += ["--artifacts-destination", str(folder / "mlartifacts")]
    return cmd


def _stderr_fd() -> int | None:
    """Return the fd the server's own output goes to: our stderr (bench's stdout keeps only its lines)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def answers(url: str, timeout_s: float = 2.0) -> bool:
    """Return whether ``url`` answers HTTP 200."""
    try:
        return get(url, timeout_s=timeout_s)[0] == 200
    except (OSError, ValueError):
        return False


def wait_answering(proc: subprocess.Popen, url: str, timeout_s: float, what: str, said: str | None) -> None:
    """Return once ``url`` answers; BenchError if ``proc`` exits or ``timeout_s`` passes (``said``: prefix)."""
    t0 = last = time.monotonic()
    while not answers(url):
        if proc.poll() is not None:
            raise BenchError(f"{what} exited ({proc.returncode}) before answering on {url}; its messages are above")
        if time.monotonic() - t0 > timeout_s:
            raise BenchError(f"{what} did not answer on {url} within {timeout_s:.0f}s")
        if said is not None and time.monotonic() - last >= 10:
            last = time.monotonic()
            print(f"{said}: waiting for {what} to answer ({last - t0:.0f}s) …", flush=True)
        time.sleep(0.2)


def stop(proc: subprocess.Popen) -> None:
    """Stop the server and every process it started (its own process group): SIGTERM, then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError):  # the server is gone; take down any worker it left behind
            os.killpg(proc.pid, signal.SIGKILL)
        break
    proc.wait()


class _Stopped(Exception):
    """SIGTERM or SIGHUP arrived: stop like Ctrl-C."""


def _raise_stopped(signum: int, _frame: object) -> None:
    raise _Stopped(signum)


def serve(run: str | None = None, port: int | None = None, timeout_s: float = READY_TIMEOUT_S) -> int:
    """Start MLflow's UI on a run's store, print its URL once it answers, serve until Ctrl-C; return an exit code."""
    uri, folder = find_store(run)
    shown = redact(uri)
    if uri.startswith(("http://", "https://")):
        print(f"MLflow UI: {shown} (MLFLOW_TRACKING_URI is a tracking server: nothing to start)", flush=True)
        return 0
    if port is not None and not port_free(port):  # else another server there could pass for ours
        raise BenchError(f"port {port} on 127.0.0.1 is in use; choose another (--port) or let bench pick one")
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/"
    print(f"ui: starting MLflow's UI on {shown} (offline: LiteLLM's bundled price map) …", flush=True)
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGTERM, signal.SIGHUP)}
    proc = None
    try:
        proc = subprocess.Popen(server_command(folder, port), env={**server_env(), STORE_ENV: uri},
                                stdin=subprocess.DEVNULL,
                                stdout=_stderr_fd(), start_new_session=True, preexec_fn=die_with_parent(os.getpid()))
        wait_answering(proc, url, timeout_s, "MLflow's UI", "ui")
        print(f"MLflow UI: {url}  (Ctrl-C stops it)", flush=True)
        code = proc.wait()
        print(f"ui: MLflow's UI exited ({code})", file=sys.stderr, flush=True)
        return code or 0
    except (KeyboardInterrupt, _Stopped):
        print("ui: stopping MLflow's UI", flush=True)
        return 0
    finally:
        if proc is not None:
            stop(proc)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
