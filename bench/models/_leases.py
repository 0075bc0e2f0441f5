"""Caps held across a whole sweep: a lease server in the driver, a ``RemoteLimiter`` per kernel.

``bench sweep`` starts a ``LeaseServer`` when executions run side by side and names it in
``BENCH_LIMITS_ADDRESS`` (inherited by every kernel). The server holds one ``LocalLimiter``;
a lease held by a process that dies is released when its connection closes.

On one machine the server listens on a unix socket in a private folder (``unix:<path>``). For a
cluster sweep (``bench sweep --cluster``) it listens on TCP at the address the driver uses to reach
the Dask scheduler (``tcp:<host>:<port>``), and every connection must first present the sweep's
random token (``BENCH_LIMITS_TOKEN``, handed to each execution's kernel in its environment, never
written to a file): a process that cannot show it is disconnected.
"""

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
from bench.models._counters import Caps, LocalLimiter

ADDRESS_ENV = "BENCH_LIMITS_ADDRESS"  # "unix:<path>" or "tcp:<host>:<port>" of the sweep's lease server; unset: per-process caps
TOKEN_ENV = "BENCH_LIMITS_TOKEN"  # the token a TCP lease server asks of every connection (a cluster sweep's)
WINDOW_ENV = "BENCH_RATE_WINDOW_S"  # tests only: the lease server's rpm/tpm window (default 60 s)


class RemoteLimiter:
    """Leases from the sweep's LeaseServer over one unix-socket connection (per process and event loop).

    Wire format: one JSON object per line. Client: ``{"op": "acquire", "id", "key", "caps",
    "est"}`` and ``{"op": "release", "id", "tokens"}`` (also how a waiting acquire is given
    up), ``{"op": "ping", "id"}`` (a worker's start-up check; on TCP after ``{"op": "hello",
    "token"}``); server: ``{"id"}`` when a lease is granted, ``{"id", "pong": true}`` for a ping.
    The connection is a plain protocol (no
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
                raise BenchError(f"cannot reach the sweep's limit server at {ADDRESS_ENV}={self.address} "
                                 f"({exc}); unset {ADDRESS_ENV} outside a sweep") from None
            self.transport = transport  # type: ignore[assignment]
            if scheme == "tcp":  # the first line proves this process belongs to the sweep
                self._send({"op": "hello", "token": os.environ.get(TOKEN_ENV, "")})

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

    By default it listens on a unix socket in a private (0700) temporary folder. With ``host``
    (a cluster sweep) it listens on TCP at that address only, and a connection whose first line
    is not ``{"op": "hello", "token": <self.token>}`` is closed. Each connection's leases end
    when it closes, so a kernel that dies (even by ``kill -9``) frees its slots at once.
    """

    def __init__(self, window_s: float | None = None, host: str | None = None):
        self.window_s = window_s or float(os.environ.get(WINDOW_ENV) or 60.0)
        self.host = host
        self.token = secrets.token_hex(16) if host else None
        self._port = 0
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
        self._clients: dict[asyncio.Task, asyncio.StreamWriter] = {}
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

    async def _admitted(self, reader: asyncio.StreamReader) -> bool:
        """Return whether a TCP connection's first line carries the sweep's token (anything else is dropped)."""
        try:
            hello = json.loads(await asyncio.wait_for(reader.readline(), timeout=30))
        except (asyncio.TimeoutError, ValueError):
            return False
        token = hello.get("token") if isinstance(hello, dict) and hello.get("op") == "hello" else None
        return isinstance(token, str) and hmac.compare_digest(token.encode(), str(self.token).encode())

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
            if self.token is not None and not await self._admitted(reader):
                return
            while line := await reader.readline():
                msg = json.loads(line)
                lease_id = int(msg["id"])
                if msg["op"] == "ping":  # a cluster worker's start-up check that it reaches this server
                    writer.write(b'{"id":%d,"pong":true}\n' % lease_id)
                elif msg["op"] == "acquire":
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
