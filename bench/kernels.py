"""Papermill executions whose kernels die with their driver: the kernel manager, its log lines, its leftovers.

Used by `bench sweep` (one execution per stage and group of cells) and `bench report` (the analysis
notebook). A kernel talks over unix sockets in a private folder that carries the driver's PID, is
SIGKILLed when the driver dies, and stays quiet when papermill shuts it down; of its output, only
the lines bench marked for the terminal (bench.core.progress.MARK) are printed, prefixed with the
execution's name.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from typing import Any

from bench.core.errors import BenchError
from bench.core.processes import die_with_parent, remove_stale_folders, socket_base
from bench.core.progress import EVERY_ENV, MARK, STREAM_ENV, every_for

KERNEL_DIR_PREFIX = "bench-kernels-"
# What a stage notebook's stage cell imports, loaded by its kernel while it starts (ipykernel's exec_lines), before
# its first cell: a kernel started ahead of need (bench.kernel_threads) has done them by the time it is adopted.
PRELOAD = ("bench.stages", "bench.run")  # with them the seam's HTTP client (aiohttp, bench.models._direct)
# What only its Outputs cells import (polars, pandas: about 1 s): loaded on a thread once the first cell runs, while
# the stage cell waits on the network, instead of delaying the kernel's readiness or the execution's end
PRELOAD_LATER = ("bench.analysis", "pandas")


def preload_arguments(modules: tuple[str, ...] = PRELOAD, later: tuple[str, ...] = PRELOAD_LATER) -> list[str]:
    """Return the kernel arguments that make it import ``modules`` while it starts, and ``later`` on a thread once
    its first cell runs (imports only: no name is left in the notebook's namespace; an import the notebook asks for
    meanwhile waits for the thread's, Python's import lock sees to that), and keep its input history in memory, as
    papermill's own kernels do. Not before the first cell: a sweep's kernels start beside the driver's preparation
    and each other, on the same cores, and those imports would slow both."""
    lines = ("import importlib as _bench_il, threading as _bench_th",
             f"[_bench_il.import_module(m) for m in {list(modules)!r}]",
             "def _bench_later(*_, _once=[], _il=_bench_il, _th=_bench_th):",
             "    if not _once:",
             "        _once.append(True)",
             f"        _th.Thread(target=lambda: [_il.import_module(m) for m in {list(later)!r}], "
             f"name='bench-preload', daemon=True).start()",
             "get_ipython().events.register('pre_run_cell', _bench_later)",
             "del _bench_il, _bench_th, _bench_later")
    return [f"--IPKernelApp.exec_lines={chr(10).join(lines)}", "--HistoryManager.hist_file=:memory:"]


def kernel_manager_class(execution: Any = None, stop: threading.Event | None = None) -> type:
    """Return a kernel manager whose kernels talk over unix sockets and are SIGKILLed when the driver dies.

    Jupyter starts kernels in their own session; killed with the driver, a kernel would go on
    calling models for a second or so until it noticed, and pay for replies nobody records.
    For a sweep's ``execution``: its kernel marks the lines meant for the terminal (bench.core.progress),
    is remembered on the execution (so an interrupt reaches it), and is not started once ``stop`` is set.
    """
    from jupyter_client.manager import AsyncKernelManager  # noqa: PLC0415 (jupyter_client: only executions need it)

    class DieWithDriver(AsyncKernelManager):
        def __init__(self, *args: Any, **kw: Any) -> None:
            # unix sockets next to the connection file, readable by this user only, instead of loopback
            # TCP that any local user can reach (and that makes ipykernel warn about it on every start)
            kw.setdefault("transport", "ipc")
            name = uuid.uuid4().hex[:16]  # 64 random bits in a private folder; short: a socket path has 107 bytes
            kw.setdefault("ip", os.path.join(_ipc_dir(), name))  # one socket prefix per kernel
            # the connection file (it holds the kernel's HMAC key) goes there too, not loose in /tmp
            kw.setdefault("connection_file", os.path.join(_ipc_dir(), f"kernel-{name}.json"))
            super().__init__(*args, **kw)
            self.client_factory = _answered_client_class()
            self.clients: list[Any] = []  # papermill's, left open on a kernel it did not start (end_kernel closes)
            # a client already connected that saw the kernel answer (bench.kernel_threads.catch_up), handed to the
            # next caller (papermill), which then need not wait for the kernel (0.2 s at least: see Answered)
            self.answered: Any = None

        def client(self, *args: Any, **kw: Any) -> Any:
            if self.answered is not None:
                kc, self.answered = self.answered, None
                return kc
            kc = super().client(*args, **kw)
            self.clients.append(kc)
            return kc

        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:  # jupyter_client interrupts every kernel it shuts down; papermill shuts one
                return  # down after its last cell, so ipykernel would only log "KeyboardInterrupt caught in kernel."
            await super()._async_interrupt_kernel()

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            kw.setdefault("preexec_fn", die_with_parent(os.getpid(), signal.SIGKILL))
            if execution is not None:
                if stop is not None and stop.is_set():
                    raise BenchError("the sweep was interrupted before this execution started")
                # an execution's own variables (a cluster sweep's lease server and caps) reach its kernel only
                kw["env"] = {**(kw.get("env") or os.environ), STREAM_ENV: "1", **(getattr(execution, "env", None) or {})}
                execution.kernel = self
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return DieWithDriver


@functools.cache
def _answered_client_class() -> type:
    """Return the kernel client class whose ``wait_for_ready`` returns at once once its kernel answered it
    (bench.kernel_threads.catch_up); else it reads IOPub until 0.2 s pass without a message, each execution."""
    from jupyter_client.asynchronous import AsyncKernelClient  # noqa: PLC0415 (jupyter_client: only executions

    class Answered(AsyncKernelClient):  # need it)
        answered = False

        async def wait_for_ready(self, timeout: float | None = None) -> None:
            if not self.answered:
                await super().wait_for_ready(timeout)

    return Answered


def start_kernel(km: Any, cwd: str) -> None:
    """Start ``km``'s kernel in ``cwd``, importing what the stage notebooks import (:func:`preload_arguments`).

    Call it on the thread that will run the execution: jupyter keeps one event loop per thread.
    """
    from jupyter_client.utils import run_sync  # noqa: PLC0415 (jupyter_client: only executions need it)

    run_sync(km.start_kernel)(extra_arguments=preload_arguments(), cwd=cwd)


def end_kernel(km: Any) -> None:
    """Close the clients papermill opened on ``km`` and kill its kernel at once (papermill does neither for a
    kernel it did not start). Only once the execution is over: everything it wrote is durable by then (its
    records, response cache and request journal are written before its stage's cell ends), so a graceful
    shutdown would only add the kernel's own teardown."""
    from jupyter_client.utils import run_sync  # noqa: PLC0415 (jupyter_client: only executions need it)

    for kc in getattr(km, "clients", []):
        kc.stop_channels()
    if km.has_kernel:
        run_sync(km.shutdown_kernel)(now=True)
    else:
        run_sync(km.cleanup_resources)()


def interrupt_kernel(ex: Any) -> None:
    """Send SIGINT to an execution's kernel if it runs: its stage stops, saves what it has, and the cell fails."""
    process = getattr(getattr(ex.kernel, "provisioner", None), "process", None)
    if process is not None and process.poll() is None:
        with contextlib.suppress(OSError):
            os.kill(process.pid, signal.SIGINT)


@functools.cache
def _ipc_dir() -> str:
    """Return a private (0700) folder for the kernels' sockets and connection files, removed at exit.

    Its name carries the driver's PID, so the folders a killed sweep left behind are removed
    when the next sweep starts (they hold the kernels' HMAC keys).
    """
    remove_stale_folders(KERNEL_DIR_PREFIX)  # this user's, of sweeps that are gone (killed before their exit)
    prefix = f"{KERNEL_DIR_PREFIX}{os.getpid()}-"
    path = tempfile.mkdtemp(prefix=prefix, dir=socket_base(len(f"/{prefix}12345678") + _SOCKET_NAME))
    atexit.register(shutil.rmtree, path, True)
    return path


_SOCKET_NAME = len("/0123456789abcdef-99")  # a kernel's socket in its folder: its name and jupyter's "-<channel>"


def first_line(err: Exception) -> str:
    """Return the last meaningful line of an error (papermill's ends with the failing cell's exception)."""
    lines = [ln for ln in str(err).splitlines() if ln.strip() and not set(ln.strip()) <= {"-"}]
    return lines[-1][:300] if lines else ""


class _PrefixedLog(logging.Handler):
    """Prints bench's own lines of papermill's streamed cell output as ``[execution] line`` (the thread's name).

    The terminal shows progress, not notebook output: of a cell's stdout only the lines bench
    marked for it (bench.core.progress.MARK: progress lines, a stage's one-line result) are shown;
    tables and other output stay in the executed notebook. Warnings and errors (a cell's
    stderr, papermill's own warnings) are always shown.
    """

    SKIP = ("Executing Cell", "Ending Cell", "Executing notebook with kernel", "Input Notebook", "Output Notebook",
            "Working directory", "Executing notebook")

    def emit(self, record: logging.LogRecord) -> None:
        loud = record.levelno >= logging.WARNING
        for line in record.getMessage().rstrip().splitlines():
            if line.startswith(MARK):
                print(f"[{record.threadName}] {line[len(MARK):]}", flush=True)
            elif loud and line.strip() and not line.startswith(self.SKIP):
                print(f"[{record.threadName}] {line}", flush=True)


# Optional imports papermill's own import would make, none of which an execution uses: jsonschema's format checkers
# (via nbformat; the IRI one builds a grammar on import; a notebook's schema checks no format) and papermill's
# remote-storage handlers (S3, Azure, GCS, HDFS, GitHub: bench executes notebooks from and to local paths only)
SKIPPED_ON_IMPORT = ("rfc3987_syntax", "rfc3986_validator", "rfc3339_validator", "isoduration", "webcolors",
                     "uri_template", "fqdn", "jsonpointer", "boto3", "pyarrow", "gcsfs", "github", "azure")


@functools.cache
def papermill() -> Any:
    """Return papermill, imported without the optional modules of SKIPPED_ON_IMPORT.

    Measured here: ``import papermill`` took 2.2 s, 1.3 of them in jsonschema's IRI checker and 0.3 in the
    storage handlers' packages, on the critical path of every execution's start (the driver's, a Dask worker's).
    Each module not already imported is made unimportable while papermill imports, and importable again after:
    only the optional features registered at that import stay off in this process (jsonschema's ``iri`` format,
    papermill's remote paths), never a later import of the module itself."""
    blocked = [name for name in SKIPPED_ON_IMPORT if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  (an import of it raises ImportError)
    try:
        import papermill as pm  # noqa: PLC0415 (0.3 s of imports: only an execution needs it)
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    return pm


def prepare_driver() -> None:
    for key, value in (("LITELLM_LOCAL_MODEL_COST_MAP", "True"), ("MLFLOW_DISABLE_TELEMETRY", "true"),
                       ("PYDEVD_DISABLE_FILE_VALIDATION", "1")):
        os.environ.setdefault(key, value)  # inherited by every kernel
    os.environ.setdefault(EVERY_ENV, str(every_for(sys.stdout)))  # kernels print to papermill: the driver's pace
    log = logging.getLogger("papermill")
    if not any(isinstance(h, _PrefixedLog) for h in log.handlers):
        log.addHandler(_PrefixedLog())
        log.setLevel(logging.INFO)
        log.propagate = False
