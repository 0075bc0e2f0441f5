"""The llama.cpp server process behind a local model: spawning it, waiting for it, stopping it.

Each model is served by ``python -m llama_cpp.server`` in a child process bound to 127.0.0.1, so the
rest of bench talks to it like any OpenAI-compatible endpoint. The child can never outlive us:

* it gets ``PR_SET_PDEATHSIG`` = SIGKILL (Linux), so the kernel stops it at once even if we are
  SIGKILLed (SIGTERM would let uvicorn finish a generation in flight first, minutes for a long one).
  That signal fires when the *thread* that forked the child exits, not the process; every server
  is therefore forked from one daemon "spawner" thread that lives as long as the process, whatever
  thread (an ``asyncio.to_thread`` worker, a notebook cell) asked for it;
* an ``atexit`` hook stops every server still running at a normal exit;
* it runs in its own session, so a terminal Ctrl-C reaches only us and our own ``stop()`` does the
  shutdown (no race between the two).

The model side (which weights, where they live, their identity) is ``bench.models.local.manager``, imported here
only inside functions: ``bench.models.local.manager`` imports this module, never the other way round at import time.
Importing this module is cheap: llama_cpp is only ever imported by the child process.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench.core.errors import LocalModelError

if TYPE_CHECKING:
    from bench.models.local.manager import LocalEndpoint, _Spec

HOST = "127.0.0.1"
STOP_GRACE_S = 5.0
LOG_TAIL_CHARS = 3000
KEEP_LOGS = 20

_T = TypeVar("_T")


# Settings llama_cpp.server reads from the environment (pydantic-settings, case-insensitive), plus
# HOST/PORT (which uvicorn.run reads and which override --host/--port!) and CONFIG_FILE (which
# replaces every flag). A stray API_KEY or PORT in the user's shell would silently break our server.
_SERVER_ENV_NAMES = frozenset("""
    host port config_file ssl_keyfile ssl_certfile api_key interrupt_requests disable_ping_events
    root_path model model_alias n_gpu_layers split_mode main_gpu tensor_split vocab_only use_mmap
    use_mlock kv_overrides rpc_servers seed n_ctx n_batch n_ubatch n_threads n_threads_batch
    rope_scaling_type rope_freq_base rope_freq_scale yarn_ext_factor yarn_attn_factor
    yarn_beta_fast yarn_beta_slow yarn_orig_ctx mul_mat_q logits_all embedding offload_kqv
    flash_attn last_n_tokens_size lora_base lora_path numa chat_format chat_template_kwargs
    clip_model_path cache cache_type cache_size hf_tokenizer_config_path
    hf_pretrained_model_name_or_path hf_model_repo_id draft_model draft_model_num_pred_tokens
    type_k type_v verbose
""".split())

_SERVER_MODULES = {
    "llama_cpp": "llama-cpp-python",
    "uvicorn": "llama-cpp-python[server]",
    "fastapi": "llama-cpp-python[server]",
    "sse_starlette": "llama-cpp-python[server]",
    "pydantic_settings": "llama-cpp-python[server]",
}


def _require_server_packages() -> None:
    """Raise LocalModelError naming the package if llama_cpp's server can't run (without importing it)."""
    from bench.models.local.manager import INSTALL_HINT  # noqa: PLC0415 (bench.models.local.manager imports this module)

    for module, package in _SERVER_MODULES.items():
        if importlib.util.find_spec(module) is None:
            raise LocalModelError(
                f"serving local models needs the Python package {package} (module {module!r} is not installed); "
                f"{INSTALL_HINT}"
            )


def _child_env() -> dict[str, str]:
    """Return the server's environment: ours minus every variable llama_cpp.server would read as a setting."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in _SERVER_ENV_NAMES}
    env["PYTHONUNBUFFERED"] = "1"  # so the log tail shows the latest messages
    return env


def _cpu_threads() -> int:
    """Return the threads to generate with: env BENCH_LOCAL_THREADS, else every CPU we may use.

    llama_cpp.server defaults to half the CPUs: 1 thread on 2 cores, about half the speed.
    """
    configured = os.environ.get("BENCH_LOCAL_THREADS", "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise LocalModelError(f"BENCH_LOCAL_THREADS={configured!r} is not a positive number of threads")
        return int(configured)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _logprobs_wanted() -> bool:
    """Return whether the embedded server must serve token logprobs (BENCH_LOCAL_LOGPROBS=1)."""
    return os.environ.get("BENCH_LOCAL_LOGPROBS", "").strip().lower() in ("1", "true", "yes")


def _server_command(path: Path, port: int, spec: _Spec, n_ctx: int) -> list[str]:
    """Return the argv that serves ``path`` as ``spec.name`` on 127.0.0.1:``port``."""
    argv = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(path),
        "--model_alias", spec.name,
        "--host", HOST,
        "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", str(_cpu_threads()),
        # Default True: a queued request cuts the running *stream* short with [DONE] (silent truncation).
        "--interrupt_requests", "false",
        # Default True where supported: pins the whole model in RAM, fails under low RLIMIT_MEMLOCK.
        "--use_mlock", "false",
        # Default True: keeps a row of vocabulary-wide logits per prompt token (Gemma's 262k vocabulary:
        # 1 MB a token). Measured on a 1510-token judge prompt: 3.0 GB RSS and 20 s with it, 0.53 GB and
        # 4.3 s without. llama-cpp-python serves token logprobs only with it: BENCH_LOCAL_LOGPROBS=1.
        "--logits_all", "true" if _logprobs_wanted() else "false",
    ]
    if spec.chat_format:
        argv += ["--chat_format", spec.chat_format]
    return argv


def _port_in_use(port: int) -> bool:
    """Return whether ``port`` on 127.0.0.1 is taken (probed like uvicorn binds: with SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return True
    return False


def _free_port() -> int:
    """Return a loopback port that is free right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _choose_port(port: int | None) -> int:
    """Return ``port`` if it is usable, a free one if None; raise LocalModelError if it is taken."""
    if port is None:
        return _free_port()
    if not 1 <= port <= 65535:
        raise LocalModelError(f"port {port} is not a valid TCP port (1-65535)")
    if _port_in_use(port):
        raise LocalModelError(f"port {port} on {HOST} is already in use; pass another --port or omit it")
    return port


def _libc_prctl() -> Callable[..., int] | None:
    """Return libc's prctl, resolved in the parent (so the forked child runs no loader code), or None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> Callable[[], None]:
    """Return a ``preexec_fn`` asking the kernel to send ``sig`` to the child when its parent thread dies.

    If the parent is already gone by the time the child runs it (a kill between fork and prctl),
    the child exits at once instead of starting an orphan.
    """
    prctl = _libc_prctl()

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


class _SpawnThread:
    """Runs every server ``Popen`` on one daemon thread that lives as long as the process.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits. Callers are often
    short-lived threads (``asyncio.to_thread`` workers end when ``asyncio.run`` returns), which
    would take the server down with them; this thread only ends with the process.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], _T], abandon: Callable[[_T], None] | None = None) -> _T:
        """Return ``fn()`` as run on the spawner thread (re-raising what it raised).

        If the caller is interrupted (Ctrl-C) while waiting, ``abandon`` later receives the result
        nobody took, so a process started in that instant is not left running.
        """
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


def _safe_name(name: str) -> str:
    """Return ``name`` reduced to file-name-safe characters (for log file names)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.")[-60:] or "model"


def _new_log_path(name: str, port: int) -> Path:
    """Return a fresh log file path under ``cache_dir()/logs/``, pruning all but the newest logs."""
    from bench.models.local.manager import cache_dir  # noqa: PLC0415 (bench.models.local.manager imports this module)

    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    old = sorted(logs.glob("local-*.log"), key=lambda p: p.stat().st_mtime)
    for stale in old[: max(0, len(old) - KEEP_LOGS)]:
        stale.unlink(missing_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return logs / f"local-{_safe_name(name)}-{port}-{stamp}-{os.getpid()}.log"


def _log_tail(path: Path | None, limit: int = LOG_TAIL_CHARS) -> str:
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
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_child_env(),
                start_new_session=True,
                preexec_fn=die_with_parent(parent, signal.SIGKILL),
                close_fds=True,
            )

    return _SPAWNER.call(popen, abandon=_kill_now)


def _kill_now(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a server process nobody owns (its starter was interrupted) and reap it."""
    _signal_group(proc, signal.SIGKILL)
    proc.wait()


def _model_ids(api_base: str, timeout_s: float) -> list[str]:
    """Return the model ids listed by ``<api_base>/models``; raises OSError/ValueError if it can't."""
    import urllib.request  # lazily: keeps `import bench.models.local.manager` cheap

    with urllib.request.urlopen(f"{api_base}/models", timeout=timeout_s) as response:  # noqa: S310 (loopback)
        payload = json.load(response)
    return [str(item.get("id")) for item in payload.get("data", [])]


_LIVE: set[LocalServer] = set()
_LIVE_LOCK = threading.Lock()


class LocalServer:
    """One llama.cpp server process serving one local model on 127.0.0.1.

    ``start()`` returns the LocalEndpoint; ``stop()`` ends the process (idempotent). Usable as a
    context manager (``with LocalServer(m) as server: server.endpoint``), which starts and stops it.
    """

    def __init__(self, model: str, port: int | None = None, n_ctx: int = 4096):
        from bench.models.local.manager import _parse  # noqa: PLC0415 (bench.models.local.manager imports this module)

        self.model = model
        self.spec = _parse(model)
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
        proc = self._proc
        return proc.pid if proc is not None else None

    def alive(self) -> bool:
        """Return whether the server process is running (it may still be loading)."""
        proc = self._proc
        return proc is not None and proc.poll() is None

    def start(self, timeout_s: float = 120.0) -> LocalEndpoint:
        """Start the server, wait until ``/v1/models`` answers, and return where to reach it.

        Raises LocalModelError when the port is taken, the packages are missing, or the process
        exits or does not answer within ``timeout_s`` (with the tail of its log).
        """
        from bench.models.local.manager import LocalEndpoint, identity, model_file  # noqa: PLC0415 (bench.models.local.manager imports this module)

        with self._lock:
            if self.alive() and self.endpoint is not None:
                return self.endpoint
            if self.n_ctx < 1:
                raise LocalModelError(f"n_ctx must be a positive number of tokens, not {self.n_ctx}")
            port = _choose_port(self.port)
            _require_server_packages()
            path = model_file(self.model)
            endpoint = LocalEndpoint(f"http://{HOST}:{port}/v1", self.spec.name, identity(self.model))
            self.log_path = _new_log_path(self.spec.name, port)
            self._proc = _spawn(_server_command(path, port, self.spec, self.n_ctx), self.log_path)
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
                raise LocalModelError(
                    f"the llama.cpp server for {self.model} exited (code {code}) before it answered; "
                    f"log {self.log_path}:\n{_log_tail(self.log_path)}"
                )
            with contextlib.suppress(OSError, ValueError):
                ids = _model_ids(endpoint.api_base, timeout_s=2.0)
                if endpoint.served_model in ids:
                    return
            if time.monotonic() > deadline:
                raise LocalModelError(
                    f"the llama.cpp server for {self.model} did not answer {endpoint.api_base}/models "
                    f"within {timeout_s:g} s; log {self.log_path}:\n{_log_tail(self.log_path)}"
                )
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


@contextlib.contextmanager
def _sigterm_raises_interrupt() -> Iterator[None]:
    """Make SIGTERM raise KeyboardInterrupt while inside (main thread only), so both stop cleanly."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
