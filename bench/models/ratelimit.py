"""Per-model caps: a model's ``max_concurrency``, ``rpm`` and ``tpm``, held for one process or a whole sweep.

A model's caps are counted per endpoint (its model string and ``api_base``), whoever
sends the request: a model and a judge on the same endpoint share its counters, and
each request is admitted against the caps its own entry declares. Three counters per
endpoint: requests in flight; request starts in a sliding window (60 s; ``rpm``); and
tokens charged in that window (``tpm``). A request is charged an estimate before it is
sent (``estimate_tokens``: prompt characters / 4 plus its ``max_tokens``, or
DEFAULT_COMPLETION_TOKENS when it sets none) and its real prompt + completion tokens
once the reply says them; a failed request keeps its estimate.

Two implementations of one small interface (``Limiter``: ``acquire`` a lease before
sending, ``release`` it with the tokens used after):

- ``LocalLimiter``: asyncio counters of one event loop; what a process uses by default
  (no server, no socket, nothing per request beyond the counters).
- ``RemoteLimiter``: leases from the sweep's ``LeaseServer``, which ``bench sweep``
  starts when executions run side by side and names in ``BENCH_LIMITS_ADDRESS``
  (inherited by every kernel). The server holds one ``LocalLimiter``; a lease held by a
  process that dies is released when its connection closes.

A distributed backend (``distributed.Semaphore`` per endpoint for Dask workers) would be
a third ``Limiter``: ``limiter_for`` picks one from the environment.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import itertools
import json
import math
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

from bench.core.errors import BenchError

ADDRESS_ENV = "BENCH_LIMITS_ADDRESS"  # "unix:<path>" of the sweep's lease server; unset: per-process caps
WINDOW_ENV = "BENCH_RATE_WINDOW_S"  # tests only: the lease server's rpm/tpm window (default 60 s)
DEFAULT_COMPLETION_TOKENS = 1024  # the completion part of a tpm estimate when a request sets no max_tokens
CHARS_PER_TOKEN = 4
_OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "maxOutputTokens", "num_predict")


@dataclass(frozen=True)
class Caps:
    """What one model entry declares: requests in flight, request starts and tokens per window (None: no cap)."""

    max_concurrency: int | None = None
    rpm: int | None = None
    tpm: int | None = None

    @property
    def windowed(self) -> bool:
        return bool(self.rpm or self.tpm)


class Limiter(Protocol):
    """The per-model caps of some scope (an event loop, a sweep, a cluster)."""

    async def acquire(self, key: str, caps: Caps, estimate: int = 0) -> Any:
        """Wait until a request to endpoint ``key`` fits ``caps`` (charging ``estimate`` tokens); return a lease."""

    def release(self, lease: Any, tokens: int | None = None) -> None:
        """End a lease at once (never waits); ``tokens`` replaces its estimate when the reply said how many."""


def endpoint_key(spec: Any) -> str:
    """Return the key a model's counters live under: its model string and api_base."""
    return f"{spec.model} @ {(spec.api_base or '').rstrip('/')}"


@functools.lru_cache(maxsize=4096)
def limits_of(spec: Any) -> tuple[str, Caps] | None:
    """Return (endpoint key, caps) of a ModelSpec, or None when it declares no cap (memoized per spec)."""
    if not (spec.max_concurrency or spec.rpm or spec.tpm):
        return None
    return endpoint_key(spec), Caps(spec.max_concurrency, spec.rpm, spec.tpm)


def estimate_tokens(body: dict[str, Any]) -> int:
    """Return the tokens a request is charged before its reply: prompt characters / 4 plus its output limit."""
    chars = 0
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(p.get("text") or "") for p in content if isinstance(p, dict))
    out = next((body[k] for k in _OUTPUT_LIMITS if isinstance(body.get(k), int)), DEFAULT_COMPLETION_TOKENS)
    return -(-chars // CHARS_PER_TOKEN) + max(0, out)


# -- one event loop ---------------------------------------------------------------------------------
class _Lease:
    __slots__ = ("gate", "entry")

    def __init__(self, gate: "_Gate", entry: list | None):
        self.gate, self.entry = gate, entry


class _Gate:
    """The counters of one endpoint, and the requests waiting for them (first come, first served)."""

    __slots__ = ("window_s", "windowed", "in_flight", "entries", "tokens", "waiters", "timer")

    def __init__(self, window_s: float):
        self.window_s = window_s
        self.windowed = False  # some request declared rpm or tpm: from then on every start is in the window
        self.in_flight = 0
        self.entries: deque[list] = deque()  # [start time, tokens charged, still in the window]
        self.tokens = 0  # tokens charged by the entries still in the window
        self.waiters: deque[tuple[asyncio.Future, Caps, int]] = deque()
        self.timer: asyncio.TimerHandle | None = None

    def wait_for(self, caps: Caps, estimate: int, now: float) -> float:
        """Return 0 if a request fits now, else the seconds until the window may let it (inf: a release will)."""
        if caps.max_concurrency and self.in_flight >= caps.max_concurrency:
            return math.inf
        if not self.windowed:
            return 0.0
        entries = self.entries
        while entries and now - entries[0][0] >= self.window_s:
            gone = entries.popleft()
            self.tokens -= gone[1]
            gone[2] = False
        wait = 0.0
        if caps.rpm and len(entries) >= caps.rpm:  # the start that must leave the window first
            wait = entries[-caps.rpm][0] + self.window_s - now
        if caps.tpm and self.tokens + estimate > caps.tpm:
            freed, start = 0, now
            for start, tokens, _live in itertools.islice(entries, 64):  # bounded: past 64, wake up and look again
                freed += tokens
                if self.tokens - freed + estimate <= caps.tpm:
                    break
            wait = max(wait, start + self.window_s - now)
        return wait

    def take(self, caps: Caps, estimate: int, now: float) -> _Lease:
        self.in_flight += 1
        entry = None
        if self.windowed:
            entry = [now, estimate, True]
            self.entries.append(entry)
            self.tokens += estimate
        return _Lease(self, entry)

    def pump(self) -> None:
        """Admit the waiting requests that fit, in order; arm a timer when the window must slide first."""
        now = time.monotonic()
        waiters = self.waiters
        while waiters:
            fut, caps, estimate = waiters[0]
            if fut.done():  # given up (cancelled)
                waiters.popleft()
                continue
            wait = self.wait_for(caps, estimate, now)
            if wait:
                if wait != math.inf:
                    self._arm(wait + 0.001)
                return
            waiters.popleft()
            fut.set_result(self.take(caps, estimate, now))

    def _arm(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        if self.timer is not None:
            if self.timer.when() <= when:
                return
            self.timer.cancel()
        self.timer = loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self.timer = None
        self.pump()


class LocalLimiter:
    """Per-model caps of one event loop: in-flight counts and sliding windows of starts and tokens."""

    def __init__(self, window_s: float = 60.0):
        self.window_s = window_s
        self.gates: dict[str, _Gate] = {}

    async def acquire(self, key: str, caps: Caps, estimate: int = 0) -> _Lease:
        gate = self.gates.get(key)
        if gate is None:
            gate = self.gates[key] = _Gate(self.window_s)
        if caps.windowed:
            gate.windowed = True
            if caps.tpm:
                estimate = min(estimate, caps.tpm)  # a request bigger than the budget goes alone in an empty window
        if not gate.waiters:
            now = time.monotonic() if gate.windowed else 0.0
            if not gate.wait_for(caps, estimate, now):
                return gate.take(caps, estimate, now)
        fut = asyncio.get_running_loop().create_future()
        gate.waiters.append((fut, caps, estimate))
        gate.pump()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # admitted just as it was cancelled
                self.release(fut.result())
            elif gate.waiters:
                gate.pump()  # the next in line may fit now
            raise

    def release(self, lease: _Lease, tokens: int | None = None) -> None:
        gate, entry = lease.gate, lease.entry
        gate.in_flight -= 1
        if tokens is not None and entry is not None and entry[2]:
            gate.tokens += tokens - entry[1]
            entry[1] = tokens
        if gate.waiters:
            gate.pump()


# -- a whole sweep: a lease server in the driver, a client per kernel ------------------------------
class RemoteLimiter:
    """Leases from the sweep's LeaseServer over one unix-socket connection (per process and event loop).

    Wire format: one JSON object per line. Client: ``{"op": "acquire", "id", "key", "caps",
    "est"}`` and ``{"op": "release", "id", "tokens"}`` (also how a waiting acquire is given
    up); server: ``{"id"}`` when a lease is granted. The connection is a plain protocol (no
    reader task), so a kernel that exits with it open leaves nothing pending behind.
    """

    def __init__(self, address: str):
        self.address = address
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, asyncio.Future] = {}
        self.next_id = 0
        self.lock: asyncio.Lock | None = None
        self.broken: str | None = None

    async def _connect(self) -> None:
        self.lock = self.lock or asyncio.Lock()
        async with self.lock:
            if self.transport is not None or self.broken:
                return
            scheme, _, where = self.address.partition(":")
            try:
                if scheme != "unix" or not where:
                    raise OSError(f"expected unix:<path>, got {self.address!r}")
                transport, _protocol = await asyncio.get_running_loop().create_unix_connection(
                    lambda: _LeaseProtocol(self), where)
            except OSError as exc:
                raise BenchError(f"cannot reach the sweep's limit server at {ADDRESS_ENV}={self.address} "
                                 f"({exc}); unset {ADDRESS_ENV} outside a sweep") from None
            self.transport = transport  # type: ignore[assignment]

    def _granted(self, lease: int) -> None:
        fut = self.pending.pop(lease, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _lost(self) -> None:
        """The server is gone (the sweep ended or died): nothing more will be granted."""
        self.broken = f"the sweep's limit server at {self.address} closed the connection"
        self.transport = None
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(BenchError(self.broken))
        self.pending.clear()

    async def acquire(self, key: str, caps: Caps, estimate: int = 0) -> int:
        if self.transport is None:
            await self._connect()
            if self.transport is None:
                raise BenchError(self.broken or f"the sweep's limit server at {self.address} is gone")
        self.next_id += 1
        lease = self.next_id
        fut = self.pending[lease] = asyncio.get_running_loop().create_future()
        self._send({"op": "acquire", "id": lease, "key": key,
                    "caps": [caps.max_concurrency, caps.rpm, caps.tpm], "est": estimate})
        try:
            await fut
        except asyncio.CancelledError:
            self.pending.pop(lease, None)
            self.release(lease)  # the server drops the request, or ends the lease it granted meanwhile
            raise
        return lease

    def release(self, lease: int, tokens: int | None = None) -> None:
        self._send({"op": "release", "id": lease, "tokens": tokens})

    def _send(self, message: dict[str, Any]) -> None:
        if self.transport is not None:
            self.transport.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")


class _LeaseProtocol(asyncio.Protocol):
    """The client end of a lease connection: grants in, loss reported."""

    def __init__(self, owner: RemoteLimiter):
        self.owner = owner
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        *lines, self.buffer = (self.buffer + data).split(b"\n")
        for line in lines:
            try:
                self.owner._granted(int(json.loads(line)["id"]))
            except (ValueError, KeyError, TypeError):
                continue

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner._lost()


class LeaseServer:
    """Serves every model's caps to the processes of one sweep, from a thread of the driver.

    It listens on a unix socket in a private (0700) temporary folder, never on a network
    address. Each connection's leases end when it closes, so a kernel that dies (even by
    ``kill -9``) frees its slots at once.
    """

    def __init__(self, window_s: float | None = None):
        self.window_s = window_s or float(os.environ.get(WINDOW_ENV) or 60.0)
        self.folder: str | None = None
        self.address: str | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    def start(self) -> str:
        """Start serving; return the address to put in BENCH_LIMITS_ADDRESS."""
        self.folder = tempfile.mkdtemp(prefix="bench-limits-")  # 0700: this user only
        atexit.register(shutil.rmtree, self.folder, True)
        path = os.path.join(self.folder, "limits.sock")
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(path, ready), name="bench-limits", daemon=True)
        self._thread.start()
        ready.wait()
        if self._error is not None:
            raise BenchError(f"cannot start the sweep's limit server: {self._error}")
        self.address = f"unix:{path}"
        return self.address

    def stop(self) -> None:
        """Stop serving and remove the socket's folder."""
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "LeaseServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self, path: str, ready: threading.Event) -> None:
        try:
            asyncio.run(self._main(path, ready))
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._error = exc
            ready.set()

    async def _main(self, path: str, ready: threading.Event) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self.limiter = LocalLimiter(self.window_s)
        self._clients: dict[asyncio.Task, asyncio.StreamWriter] = {}
        server = await asyncio.start_unix_server(self._client, path=path)
        os.chmod(path, 0o600)
        ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for writer in self._clients.values():  # each handler then sees the end of its stream and returns
                writer.close()
            await asyncio.gather(*self._clients, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one process: grant its leases in order, and end every one of them when it goes away."""
        limiter = self.limiter
        me = asyncio.current_task()
        self._clients[me] = writer
        held: dict[int, Any] = {}
        waiting: dict[int, asyncio.Task] = {}

        def granted(lease_id: int, task: asyncio.Task) -> None:
            if waiting.pop(lease_id, None) is None or task.cancelled():
                return  # given up meanwhile: the release already ended it (or it was never granted)
            held[lease_id] = task.result()
            writer.write(b'{"id":%d}\n' % lease_id)

        try:
            while line := await reader.readline():
                msg = json.loads(line)
                lease_id = int(msg["id"])
                if msg["op"] == "acquire":
                    cmax, rpm, tpm = (int(v) if v else None for v in msg["caps"])
                    task = asyncio.ensure_future(limiter.acquire(str(msg["key"]), Caps(cmax, rpm, tpm),
                                                                 int(msg["est"])))
                    waiting[lease_id] = task
                    task.add_done_callback(functools.partial(granted, lease_id))
                elif lease_id in held:
                    tokens = msg.get("tokens")
                    limiter.release(held.pop(lease_id), int(tokens) if tokens is not None else None)
                elif (task := waiting.pop(lease_id, None)) is not None:
                    if task.done() and not task.cancelled():
                        limiter.release(task.result())
                    else:
                        task.cancel()
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a broken or garbled connection ends like a closed one
        finally:
            for lease_id, task in list(waiting.items()):
                waiting.pop(lease_id)
                if task.done() and not task.cancelled():
                    limiter.release(task.result())
                else:
                    task.cancel()
            for lease in held.values():
                limiter.release(lease)
            held.clear()
            writer.close()
            self._clients.pop(me, None)


_remote: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RemoteLimiter] = weakref.WeakKeyDictionary()


def limiter_for(window_s: float = 60.0) -> Limiter:
    """Return the limiter for the running event loop: the sweep's lease server when BENCH_LIMITS_ADDRESS
    is set (one connection per process and loop, shared by every client), else new in-process counters."""
    address = os.environ.get(ADDRESS_ENV)
    if not address:
        return LocalLimiter(window_s)
    loop = asyncio.get_running_loop()
    limiter = _remote.get(loop)
    if limiter is None:
        limiter = _remote[loop] = RemoteLimiter(address)
    return limiter
