"""Kernels started before their executions are known, each on the thread that later runs its execution.

A kernel takes about a second to start and import what a stage notebook imports; a local sweep's driver takes
about as long to import its own modules, open the params file and prepare (preflight, the estimate). So
`bench sweep` starts ``--jobs`` kernels (at most one per core) the moment its arguments parse
(:func:`start_early`), and the first stage's executions adopt them (:func:`take_early`): the two seconds overlap
instead of adding up.

A kernel inherits the driver's environment as it was when it started. When an execution adopts it, the
variables the driver set or removed since (the lease server's address, the sweep cap, the budget, the embedded
model's address: none exists before the params file is read) and the run's working folder reach it in one
silent request over the kernel's own authenticated socket (:func:`catch_up`): never through a file, the
notebook or a command line. A kernel that cannot be caught up is ended, and papermill starts the execution's
kernel as without a head start.

jupyter keeps one event loop per thread, so a kernel is started on the thread that runs its execution. Kernels
no execution adopts are ended by :func:`end_unused` (a stage has started its executions) or at exit; each one
also dies with the driver (bench.kernels).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from bench.core.progress import STREAM_ENV
from bench.kernels import end_kernel, kernel_manager_class, prepare_driver, start_kernel

LAUNCH_WAIT_S = 10.0  # start_early returns by then even if a kernel's launch hangs (it is still adopted later)
CATCH_UP_TIMEOUT_S = 120.0  # a kernel still starting on a loaded 2-core machine answers well within this


class _Unassigned:
    """What a kernel started before its execution is known launches for: no variables of its own yet."""

    env: dict[str, str] | None = None
    kernel: Any = None


class KernelThread:
    """A thread that starts a kernel at once, then waits for the task that runs an execution on it (or for none:
    then it ends the kernel)."""

    def __init__(self, name: str, stop: threading.Event, execution: Any = None, cwd: str | None = None):
        self.execution = execution  # known at start (a head start of a known stage), or adopted later
        self.task: Callable[..., None] | None = None
        self.km: Any = None
        self.launched: dict[str, str] = {}  # the environment the kernel started with
        self.spawned = threading.Event()  # set once its process was spawned (or could not be)
        self.wake = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(stop, cwd), name=name, daemon=True)

    def start(self) -> KernelThread:
        self.thread.start()
        return self

    def _run(self, stop: threading.Event, cwd: str | None) -> None:
        try:
            with contextlib.suppress(Exception):  # cancelled first, or no kernel could start: papermill then
                self.km = kernel_manager_class(self.execution or _Unassigned(), stop)(kernel_name="python3")
                self.launched = {**os.environ, STREAM_ENV: "1", **(getattr(self.execution, "env", None) or {})}
                start_kernel(self.km, cwd or os.getcwd())  # starts it as without a head start, and says why not
            self.spawned.set()
            self.wake.wait()
            if self.task is None:
                if self.km is not None:
                    end_kernel(self.km)
            else:
                self.task(km=self.km)
        finally:
            self.spawned.set()
            self.done.set()

    def adopt(self, execution: Any, task: Callable[..., None], cwd: str, stop: threading.Event | None = None) -> None:
        """Run ``task(execution, km=…)`` on this thread, the kernel first caught up with the driver's environment
        and moved to ``cwd`` (:func:`catch_up`: also when it was started for this execution, which leaves a
        connected client for papermill). ``stop`` set (the stage was interrupted): no waiting for the kernel."""
        self.execution = execution

        def run(km: Any) -> None:
            if km is not None:
                try:
                    km = catch_up(km, self.launched, cwd, getattr(execution, "env", None), stop)
                except Exception:  # noqa: BLE001 (whatever failed, the task runs: papermill starts a fresh kernel)
                    with contextlib.suppress(Exception):
                        end_kernel(km)
                    km = None
            if km is not None:
                execution.kernel = km  # an interrupt reaches it (bench.kernels.interrupt_kernel)
            task(execution, km=km)

        self.task = run
        self.wake.set()

    def cancel(self) -> None:
        """End the kernel without running anything on it."""
        self.task = None
        self.wake.set()


def catch_up(km: Any, launched: dict[str, str], cwd: str, extra: dict[str, str] | None,
             stop: threading.Event | None = None) -> Any:
    """Give ``km``'s running kernel the environment a kernel started now would get (the driver's, with the
    execution's own ``extra``) and ``cwd`` as its working folder; return ``km``, or None when the kernel cannot
    be reached (it is ended: papermill starts a fresh one with the right environment).

    The client that asked is left connected for papermill (the kernel manager's ``answered``) once it has seen the
    kernel's reply and an IOPub message of its request (so its IOPub socket has joined: papermill reads the first
    cell's output there). The request is sent again each second until both came (a kernel still starting may not
    take the first): it only sets values. ``stop`` set: the kernel is ended at once."""
    from jupyter_client.utils import run_sync  # noqa: PLC0415 (jupyter_client: only executions need it)

    now = {**os.environ, STREAM_ENV: "1", **(extra or {})}
    changed = {k: v for k, v in now.items() if launched.get(k) != v}
    gone = [k for k in launched if k not in now]
    code = (f"import os as _bench_os; _bench_os.environ.update({changed!r}); "
            f"[_bench_os.environ.pop(k, None) for k in {gone!r}]; _bench_os.chdir({cwd!r}); del _bench_os")

    async def send(kc: Any) -> bool:
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        asked: set[str] = set()
        replied = published = False
        while time.monotonic() < deadline and (stop is None or not stop.is_set()) and await km.is_alive():
            asked.add(kc.execute(code, silent=True, store_history=False))
            try:
                while not replied:
                    reply = await kc.get_shell_msg(timeout=1.0)
                    if reply["parent_header"].get("msg_id") in asked:
                        if reply["content"]["status"] != "ok":
                            return False
                        replied = True
                while not published:
                    published = (await kc.get_iopub_msg(timeout=1.0))["parent_header"].get("msg_id") in asked
                return True
            except queue.Empty:
                continue
        return False

    try:
        kc = km.client()
        kc.start_channels(hb=False)  # papermill starts the heartbeat when it takes this client (a thread starts once)
        if run_sync(send)(kc):
            kc.answered = True
            km.answered = kc
            return km
    except Exception:  # noqa: BLE001 (a kernel that died or never answered: a fresh one is started instead)
        pass
    with contextlib.suppress(Exception):
        end_kernel(km)
    return None


class Prestart:
    """A stage's executions, the first ``count`` of them with kernels already starting: kernels :func:`start_early`
    started (caught up when released), then, with ``launch``, new ones started for their executions."""

    def __init__(self, executions: list[Any], count: int, cwd: str, *, launch: bool = True):
        self.executions, self.cwd = executions, cwd
        self.stop = threading.Event()  # the stage's: set by a cancel or a Ctrl-C, no kernel starts any more
        self.kernels = take_early(min(count, len(executions)))
        self._new = ([KernelThread(ex.name, self.stop, ex, cwd) for ex in executions[len(self.kernels):count]]
                     if launch else [])
        self.kernels += self._new

    def start(self) -> None:
        """Start the kernels launched for this stage's executions."""
        prepare_driver()  # the variables every kernel inherits, and papermill's log lines
        for k in self._new:
            k.start()

    def release(self, sem: threading.Semaphore, run_one: Callable[..., None]) -> list[Any]:
        """Run ``run_one(ex, km=…, held=…)`` on each kernel's thread (``held``: a slot of ``sem`` was free and is
        taken for it here, so the executions whose kernels started run first); return those executions."""
        released, self.kernels = self.kernels, []
        for ex, k in zip(self.executions, released):
            k.adopt(ex, functools.partial(run_one, held=sem.acquire(blocking=False)), self.cwd, self.stop)
        return self.executions[:len(released)]

    def cancel(self, wait_s: float = 15.0) -> None:
        """End every kernel not released and wait (at most ``wait_s``) until each is gone."""
        cancelled, self.kernels = self.kernels, []
        self.stop.set()
        for k in cancelled:
            k.cancel()
        deadline = time.monotonic() + wait_s
        for k in cancelled:
            k.done.wait(max(0.0, deadline - time.monotonic()))


_early: list[KernelThread] = []
_early_lock = threading.Lock()


def start_early(count: int, wait_s: float = LAUNCH_WAIT_S) -> None:
    """Start ``count`` kernels now, for the first executions of this process's sweep to adopt (see the module).

    Returns once their processes are spawned (at most ``wait_s``): the caller's own imports would otherwise
    share the interpreter with the launch and delay it (measured: spawned 1.2 s after the CLI began instead of
    0.6 s), while a spawned kernel boots on another core."""
    prepare_driver()
    stop = threading.Event()
    with _early_lock:
        started = [KernelThread(f"kernel-{i + 1}", stop).start() for i in range(count)]
        _early.extend(started)
    atexit.register(end_unused)
    deadline = time.monotonic() + wait_s
    for k in started:
        k.spawned.wait(max(0.0, deadline - time.monotonic()))


def take_early(count: int) -> list[KernelThread]:
    """Return up to ``count`` of the kernels :func:`start_early` started (each once)."""
    with _early_lock:
        taken, _early[:] = _early[:count], _early[count:]
    return taken


def end_unused(wait_s: float = 15.0) -> None:
    """End the kernels no execution took, and wait (at most ``wait_s``) until each is gone."""
    left = take_early(len(_early))
    for k in left:
        k.cancel()
    for k in left:
        k.done.wait(wait_s)
