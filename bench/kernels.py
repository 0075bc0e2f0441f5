"""Papermill executions whose kernels die with their driver: unix sockets in a private folder, SIGKILL when the
driver dies, and only bench's marked output lines printed, prefixed with the execution's name."""

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
from bench.core.progress import MARK

KERNEL_DIR_PREFIX = "bench-kernels-"
# ipykernel's input history in memory, as papermill's own kernels keep it: no sqlite file shared by parallel kernels
KERNEL_ARGUMENTS = ["--HistoryManager.hist_file=:memory:"]


def kernel_manager_class(execution: Any = None, stop: threading.Event | None = None) -> type:
    """Return a kernel manager whose kernels use unix sockets, are SIGKILLed with the driver, get ``env``."""
    from jupyter_client.manager import AsyncKernelManager  # noqa: PLC0415 (jupyter_client: only executions need it)

    class DieWithDriver(AsyncKernelManager):
        def __init__(self, *args: Any, **kw: Any) -> None:
            kw.setdefault("transport", "ipc")  # unix sockets only this user can reach, not loopback TCP
            name = uuid.uuid4().hex[:16]  # 64 random bits in a private folder; short: a socket path has 107 bytes
            kw.setdefault("ip", os.path.join(_ipc_dir(), name))  # one socket prefix per kernel
            kw.setdefault("connection_file", os.path.join(_ipc_dir(), f"kernel-{name}.json"))  # holds its HMAC key
            super().__init__(*args, **kw)

        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:  # jupyter_client interrupts every kernel it shuts down; papermill shuts one
                return  # down after its last cell, so ipykernel would only log "KeyboardInterrupt caught in kernel."
            await super()._async_interrupt_kernel()

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            kw.setdefault("preexec_fn", die_with_parent(os.getpid(), signal.SIGKILL))
            if execution is not None:
                if stop is not None and stop.is_set():
                    raise BenchError("the sweep was interrupted before this execution started")
                # an execution's own variables (a cluster's provider keys, its lease token) reach its kernel only
                kw["env"] = {**(kw.get("env") or os.environ), **(getattr(execution, "env", None) or {})}
                execution.kernel = self
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return DieWithDriver


def interrupt_kernel(ex: Any) -> bool:
    """Send SIGINT to an execution's kernel if it runs and listens for it; return whether it was sent."""
    process = getattr(getattr(ex.kernel, "provisioner", None), "process", None)
    if process is None or process.poll() is not None or _ignores_sigint(process.pid):
        return False
    with contextlib.suppress(OSError):
        os.kill(process.pid, signal.SIGINT)
        return True
    return False


def _ignores_sigint(pid: int) -> bool:
    """Return whether process ``pid`` ignores SIGINT now (Linux: /proc; elsewhere taken as listening)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            ignored = next(int(line.split()[1], 16) for line in fh if line.startswith(b"SigIgn:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return False
    return bool(ignored >> (signal.SIGINT - 1) & 1)


@functools.cache
def _ipc_dir() -> str:
    """Return a private (0700) folder for the kernels' sockets, removed at exit (or by the next sweep if killed)."""
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
    """Prints bench's marked lines of papermill's streamed cell output as ``[execution] line``; warnings always."""

    SKIP = ("Executing Cell", "Ending Cell", "Executing notebook with kernel", "Input Notebook", "Output Notebook",
            "Working directory", "Executing notebook")

    def emit(self, record: logging.LogRecord) -> None:
        loud = record.levelno >= logging.WARNING
        for line in record.getMessage().rstrip().splitlines():
            if line.startswith(MARK):
                print(f"[{record.threadName}] {line[len(MARK):]}", flush=True)
            elif loud and line.strip() and not line.startswith(self.SKIP):
                print(f"[{record.threadName}] {line}", flush=True)


# optional imports of papermill's that no execution uses: jsonschema's format checkers, remote-storage handlers
SKIPPED_ON_IMPORT = ("rfc3987_syntax", "rfc3986_validator", "rfc3339_validator", "isoduration", "webcolors",
                     "uri_template", "fqdn", "jsonpointer", "boto3", "pyarrow", "gcsfs", "github", "azure")


@functools.cache
def papermill() -> Any:
    """Return papermill, imported without the optional modules of SKIPPED_ON_IMPORT (docs/scaling.md)."""
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
    """Set the variables every kernel inherits (no secret) and route papermill's log lines to _PrefixedLog."""
    for key, value in (("LITELLM_LOCAL_MODEL_COST_MAP", "True"), ("MLFLOW_DISABLE_TELEMETRY", "true"),
                       ("PYDEVD_DISABLE_FILE_VALIDATION", "1")):
        os.environ.setdefault(key, value)  # inherited by every kernel
    log = logging.getLogger("papermill")
    if not any(isinstance(h, _PrefixedLog) for h in log.handlers):
        log.addHandler(_PrefixedLog())
        log.setLevel(logging.INFO)
        log.propagate = False
