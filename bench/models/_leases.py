"""Caps held across a whole sweep: a lease server in the driver (a ``LocalLimiter`` and the sweep's ``Purse``), a
``RemoteLimiter`` per kernel; a dead process's leases end with its connection, its open reservations count spent."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import hmac
import os
import secrets
import shutil
import tempfile
import threading
from typing import Any

from bench.core.errors import BenchError
from bench.core.processes import remove_stale_folders, socket_base
from bench.models._counters import Caps, LocalLimiter
from bench.models._purse import Purse, Spending

TOKEN_ENV = "BENCH_LIMITS_TOKEN"  # the token a TCP lease server asks of every connection (a cluster sweep's)
HELLO_S = 5.0  # a TCP connection that has not shown the sweep's token by then is closed
MAX_UNPROVEN = 32  # TCP connections waiting to show it at once (a newcomer past that closes the oldest)
MAX_CONNECTIONS = 4096  # connections served at once (each kernel holds one per event loop)
FOLDER_PREFIX = "bench-limits-"  # + the driver's pid: the private folder of a lease server's unix socket


class RemoteLimiter:
    """Leases from the sweep's LeaseServer over one connection (per process and event loop), one JSON per line.

    Client ops: acquire {id, key, caps, est}, release {id, tokens} (also gives up a wait), ping, hello {token} (TCP),
    reserve {id, usd} → {id, ok} or {id, ok: false, spent, limit | error}, settle {id, usd} (null: unknown), spent.
    Server: {id} when granted, {id, pong: true}. No reader task: a kernel exiting with it open leaves nothing behind.
    """

    def __init__(self, address: str):
        self.address = address
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, asyncio.Future] = {}
        self.next_id = 0
        self.lock: asyncio.Lock | None = None
        self.broken: str | None = None
        self.unsent = 0.0  # ``spent`` before the connection was made

    async def _connect(self) -> None:
        self.lock = self.lock or asyncio.Lock()
        async with self.lock:
            if self.transport is not None or self.broken:
                return
            scheme, _, where = self.address.partition(":")
            loop = asyncio.get_running_loop()
            try:
                if scheme == "unix" and where:
                    transport, _protocol = await loop.create_unix_connection(lambda: _LeaseProtocol(self), where)
                elif scheme == "tcp" and where.rpartition(":")[2].isdigit():
                    host, _, port = where.rpartition(":")
                    transport, _protocol = await loop.create_connection(lambda: _LeaseProtocol(self), host, int(port))
                else:
                    raise OSError(f"expected unix:<path> or tcp:<host>:<port>, got {self.address!r}")
            except OSError as exc:
                raise BenchError(f"cannot reach the sweep's limit server at {self.address} ({exc}); outside a "
                                 f"sweep, leave the notebook's lease_server parameter at None") from None
            self.transport = transport  # type: ignore[assignment]
            if scheme == "tcp":  # the first line proves this process belongs to the sweep
                self._send({"op": "hello", "token": os.environ.get(TOKEN_ENV, "")})
            self.spent(0.0)  # what was counted before the connection, ahead of any reservation

    def _granted(self, lease: int, answer: dict[str, Any]) -> None:
        fut = self.pending.pop(lease, None)
        if fut is not None and not fut.done():
            fut.set_result(answer)

    def _lost(self) -> None:
        """The server is gone (the sweep ended or died): nothing more will be granted."""
        self.broken = f"the sweep's limit server at {self.address} closed the connection"
        self.transport = None
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(BenchError(self.broken))
        self.pending.clear()

    async def acquire(self, key: str, caps: Caps, estimate: int = 0, rank: float = 0.0, **also: Any) -> int:
        ask = {"op": "acquire", "key": key, "caps": [caps.max_concurrency, caps.rpm, caps.tpm], "est": estimate,
               **also, **({"rank": rank} if rank else {})}
        return (await self._ask(ask, give_up={"op": "release", "tokens": None}))[0]

    async def acquire_pair(self, key: str, caps: Caps, estimate: int, shared_key: str, shared_caps: Caps,
                           rank: float = 0.0) -> int:
        """Both leases of ``LocalLimiter.acquire_pair`` in one round trip; one id ends both (``release_pair``)."""
        return await self.acquire(key, caps, estimate, rank, also=[shared_key, shared_caps.max_concurrency])

    def release(self, lease: int, tokens: int | None = None) -> None:
        self._send({"op": "release", "id": lease, "tokens": tokens})

    release_pair = release  # the server knows the id holds two leases

    async def reserve(self, usd: float) -> tuple[int, dict[str, Any]]:
        """Reserve ``usd`` of the sweep's budget (waiting for room); return (id, the server's answer)."""
        return await self._ask({"op": "reserve", "usd": usd}, give_up={"op": "settle", "usd": 0.0})

    def settle(self, reservation: int, usd: float | None) -> None:
        """End a reservation with the reply's cost (None: unknown, counted as reserved; 0.0: nothing was paid)."""
        self._send({"op": "settle", "id": reservation, "usd": usd})

    def spent(self, usd: float) -> None:
        """Count ``usd`` as spent without a reservation (a cached reply a killed process paid): sent now, or as soon
        as the connection is made, before any reservation after it."""
        self.unsent += usd
        if self.transport is not None and self.unsent:
            self._send({"op": "spent", "id": 0, "usd": self.unsent})
            self.unsent = 0.0

    async def connect(self) -> None:
        """Connect now (what ``spent`` holds is sent first); a server out of reach is said by the next reservation."""
        with contextlib.suppress(BenchError):
            await self._connect()

    async def _ask(self, message: dict[str, Any], give_up: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Send ``message`` under a new id and wait for the server's answer; a cancelled wait sends ``give_up``."""
        if self.transport is None:
            await self._connect()
            if self.transport is None:
                raise BenchError(self.broken or f"the sweep's limit server at {self.address} is gone")
        self.next_id += 1
        ask_id = self.next_id
        fut = self.pending[ask_id] = asyncio.get_running_loop().create_future()
        self._send({**message, "id": ask_id})
        try:
            answer = await fut
        except asyncio.CancelledError:
            self.pending.pop(ask_id, None)
            self._send({**give_up, "id": ask_id})  # the server drops the request, or ends what it granted meanwhile
            raise
        return ask_id, answer

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
                answer = json.loads(line)
                self.owner._granted(int(answer["id"]), answer)
            except (ValueError, KeyError, TypeError):
                continue

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner._lost()


class LeaseServer:
    """Serves every model's caps to one sweep's processes from a driver thread (unix socket, or TCP with ``host``)."""

    def __init__(self, window_s: float = 60.0, host: str | None = None, budget: tuple[float, float] | None = None):
        self.window_s = window_s  # the rpm/tpm window: the params' limits.rate_window_s
        self.host = host
        self.budget = budget  # (limits.budget_usd, USD the run folder had spent when the sweep started), or None
        self.purse: Purse | None = None
        self.token = secrets.token_hex(16) if host else None
        self._port = 0
        self.folder: str | None = None
        self.address: str | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    @staticmethod
    def remove_stale() -> list[str]:
        """Remove the socket folders of this user's dead drivers (kill -9 runs no atexit); return their paths."""
        return remove_stale_folders(FOLDER_PREFIX, "limits.sock")

    def start(self) -> str:
        """Start serving; return the address the sweep passes to its executions."""
        self.remove_stale()
        prefix = f"{FOLDER_PREFIX}{os.getpid()}-"  # 0700: this user only; short enough for its socket's path
        self.folder = tempfile.mkdtemp(prefix=prefix, dir=socket_base(len(f"/{prefix}12345678/limits.sock")))
        atexit.register(shutil.rmtree, self.folder, True)
        path = os.path.join(self.folder, "limits.sock")
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(path, ready), name="bench-limits", daemon=True)
        self._thread.start()
        ready.wait()
        if self._error is not None:
            raise BenchError(f"cannot start the sweep's limit server: {self._error}")
        self.address = f"tcp:{self.host}:{self._port}" if self.host else f"unix:{path}"
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
        self.purse = Purse(*self.budget) if self.budget is not None else None
        self._clients: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self._unproven: dict[asyncio.Task, asyncio.StreamWriter] = {}  # TCP connections yet to show the token
        if self.host:
            server = await asyncio.start_server(self._client, host=self.host, port=0)
            self._port = server.sockets[0].getsockname()[1]
        else:
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

    async def _admitted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Return whether a TCP connection's first line carries the sweep's token, within HELLO_S."""
        me = asyncio.current_task()
        self._unproven[me] = writer
        while len(self._unproven) > MAX_UNPROVEN:
            oldest = next(iter(self._unproven))
            self._unproven.pop(oldest).close()  # its readline ends: that handler returns
        try:
            hello = json.loads(await asyncio.wait_for(reader.readline(), timeout=HELLO_S))
        except (asyncio.TimeoutError, ValueError, ConnectionError):
            return False
        finally:
            self._unproven.pop(me, None)
        token = hello.get("token") if isinstance(hello, dict) and hello.get("op") == "hello" else None
        return isinstance(token, str) and hmac.compare_digest(token.encode(), str(self.token).encode())

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one process: grant its leases in order, and end every one of them when it goes away."""
        limiter = self.limiter
        me = asyncio.current_task()
        self._clients[me] = writer
        held: dict[int, Any] = {}
        waiting: dict[int, asyncio.Task] = {}
        spending = Spending(self.purse, writer)

        def granted(lease_id: int, task: asyncio.Task) -> None:
            if waiting.pop(lease_id, None) is None or task.cancelled():
                return  # given up meanwhile: the release already ended it (or it was never granted)
            held[lease_id] = task.result()
            writer.write(b'{"id":%d}\n' % lease_id)

        try:
            if self.token is not None and not await self._admitted(reader, writer):
                return
            if len(self._clients) > MAX_CONNECTIONS:  # one per kernel and event loop: this many is no sweep's
                return
            while line := await reader.readline():
                msg = json.loads(line)
                lease_id = int(msg["id"])
                if msg["op"] == "ping":  # a cluster worker's start-up check that it reaches this server
                    writer.write(b'{"id":%d,"pong":true}\n' % lease_id)
                elif msg["op"] in ("reserve", "settle", "spent"):
                    spending.handle(msg["op"], lease_id, msg.get("usd"))
                elif msg["op"] == "acquire":
                    task = asyncio.ensure_future(_acquire(limiter, msg))
                    waiting[lease_id] = task
                    task.add_done_callback(functools.partial(granted, lease_id))
                elif lease_id in held:
                    tokens = msg.get("tokens")
                    _end(limiter, held.pop(lease_id), int(tokens) if tokens is not None else None)
                elif (task := waiting.pop(lease_id, None)) is not None:
                    _drop(limiter, task)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a broken or garbled connection ends like a closed one
        finally:
            while waiting:
                _drop(limiter, waiting.popitem()[1])
            for lease in held.values():
                _end(limiter, lease)
            held.clear()
            spending.close()
            writer.close()
            self._clients.pop(me, None)


def _acquire(limiter: LocalLimiter, msg: dict[str, Any]) -> Any:
    """Return the wait for an ``acquire`` message: one lease, or with ``also`` a pair (``acquire_pair``)."""
    cmax, rpm, tpm = (int(v) if v else None for v in msg["caps"])
    key, caps, estimate, rank = str(msg["key"]), Caps(cmax, rpm, tpm), int(msg["est"]), float(msg.get("rank") or 0.0)
    if msg.get("also"):
        shared_key, shared_cap = msg["also"]
        return limiter.acquire_pair(key, caps, estimate, str(shared_key), Caps(max_concurrency=int(shared_cap)), rank)
    return limiter.acquire(key, caps, estimate, rank)


def _end(limiter: LocalLimiter, lease: Any, tokens: int | None = None) -> None:
    """End a lease the server granted (a pair of them: both)."""
    if isinstance(lease, tuple):
        limiter.release_pair(lease, tokens)
    else:
        limiter.release(lease, tokens)


def _drop(limiter: LocalLimiter, task: asyncio.Task) -> None:
    """Give up a waiting acquire: end its lease if granted meanwhile, else cancel the wait."""
    if task.done() and not task.cancelled():
        _end(limiter, task.result())
    else:
        task.cancel()
