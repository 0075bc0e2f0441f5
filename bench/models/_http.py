"""The direct transport's HTTP/1.1 client: one ``Endpoint`` per route and event loop keeps its connections
alive and sends each request as one write, its reply read by a protocol (``_Connection``) into
``(status, headers, body)`` (the headers only for a status other than 200).

Why not aiohttp's ``ClientSession``: per request it builds a request and a response object, a header
multidict, a stream reader, timers and trace hooks, about 3,800 bytecodes of which a chat completion needs a
few hundred (``benchmarks/seam_profile.py`` counts them; docs/llm-seam.md has the figures). What it does that an
OpenAI-compatible endpoint needs is here: http and https (the system's certificates, as aiohttp; a private CA
through ``SSL_CERT_FILE``), a Content-Length, chunked or read-to-close body, gzip or deflate if a server
compresses anyway, interim 1xx replies skipped, keep-alive unless the server says ``Connection: close``, a total
timeout per request (connecting included), DNS answers kept five minutes, a host's next address tried 250 ms
into a connect that has not answered (as aiohttp's connector), an idle connection older than 15 s closed instead
of reused (as aiohttp's, before a NAT or a load balancer forgets it). A connection whose reply was not read whole
(a timeout, a cancel, a drop, a close) is closed, never reused, and a reply is never taken from a connection
reset or closed by this side (over TLS, a close without TLS's own close_notify still ends a reply that has no
length, as it did with aiohttp). The key lives in the request head, in memory only.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import re
import socket
import ssl
import zlib
from typing import Any
from urllib.parse import quote, unquote, urlsplit

Response = tuple[int, "dict[str, str] | None", bytes]  # status, the headers (lower-case names; None on a 200), body

DNS_TTL_S = 300.0  # as the aiohttp connector bench used before (ttl_dns_cache=300)
NEXT_ADDRESS_S = 0.25  # a connect not answered by then: the host's next address is tried beside it (happy eyeballs)
IDLE_S = 15.0  # an idle connection older than this is closed, not reused (aiohttp's keepalive_timeout)
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_MAX_HEAD = 65536  # a reply head past this is no HTTP server's: the connection is dropped
_TLS: list[ssl.SSLContext] = []  # the default context, made on the first https connection (~20 ms: it loads the CAs)


class ConnectFailed(Exception):
    """No connection to the endpoint (refused, no such host, a certificate that does not verify)."""

    def __init__(self, os_error: OSError):
        super().__init__(str(os_error))
        self.os_error = os_error


class Dropped(Exception):
    """The connection closed, or the server broke HTTP, before the whole reply was read."""


def basic_credentials(url: str) -> tuple[str, str | None]:
    """Return ``url`` without its ``user:password@`` and their Basic token (None without them): sent as HTTP wants."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    return parts._replace(netloc=host).geturl(), token


def tls_context() -> ssl.SSLContext:
    """Return the process's default TLS context (the system's CAs; ``SSL_CERT_FILE`` names others)."""
    if not _TLS:
        _TLS.append(ssl.create_default_context())
    return _TLS[0]


class Endpoint:
    """POSTs to one URL over kept-alive connections; made and used on one event loop."""

    def __init__(self, url: str, headers: dict[str, str], idle_s: float = IDLE_S):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http:// or https:// URL; write the api_base as http://host:port/v1")
        self.loop = asyncio.get_running_loop()
        self.host = parts.hostname
        try:  # a name the resolver cannot take (an empty label, one over 63 characters) is refused here, by name
            host = self.host.encode("idna").decode("ascii")
        except UnicodeError:
            raise ValueError(f"{url!r}: the host {self.host!r} is not a valid host name") from None
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = tls_context() if parts.scheme == "https" else None
        safe = "/%:@!$&'()*+,;=-._~"
        query = f"?{quote(parts.query, safe=safe + '?')}" if parts.query else ""
        target = quote(parts.path or "/", safe=safe) + query
        netloc = f"[{host}]" if ":" in host else host
        lines = [f"POST {target} HTTP/1.1", f"Host: {netloc}{f':{parts.port}' if parts.port else ''}",
                 *(f"{k}: {v}" for k, v in headers.items())]
        if any("\r" in line or "\n" in line for line in lines):
            raise ValueError(f"a header for {self.host} holds a line break (check the key variable's value)")
        self.head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
        self.idle: list[_Connection] = []  # kept alive, the most recently used last
        self.open: set[_Connection] = set()
        self.addresses: list[tuple[int, Any]] = []
        self.resolved_at = -DNS_TTL_S
        self.idle_s = idle_s
        self.closed = False

    async def post(self, body: bytes, timeout_s: float) -> Response:
        """Send ``body`` and return the reply; raise TimeoutError, ConnectFailed or Dropped."""
        deadline = self.loop.time() + timeout_s
        conn = self._reusable()
        if conn is None:
            conn = await self._connect(deadline)
        waiter = conn.send(b"".join((self.head, b"%d\r\n\r\n" % len(body), body)), deadline)
        try:
            return await waiter
        except BaseException:  # timed out, dropped or cancelled: a reply may still come, so no request may follow
            if conn.waiter is waiter:  # (once its reply is in, the connection may carry another's request: kept)
                conn.abandon()
            raise

    def close(self) -> None:
        """Close every connection; a request still waiting on one fails as dropped."""
        self.closed = True
        self.idle.clear()
        for conn in list(self.open):
            conn.fail(Dropped("its connection was closed by LLM.aclose"))
            conn.abandon()

    def forget(self, conn: _Connection) -> None:
        self.open.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)

    def _reusable(self) -> _Connection | None:
        """Return the most recently used idle connection still open, or None; close the idle ones gone stale."""
        idle = self.idle
        while idle:
            conn = idle.pop()
            if conn.lost or conn.transport.is_closing():
                continue
            if self.loop.time() - conn.idle_since > self.idle_s:  # and so is every one below it: all closed
                for stale in (conn, *idle):
                    stale.abandon()
                idle.clear()
                return None
            return conn
        return None

    async def _connect(self, deadline: float) -> _Connection:
        if self.closed:  # a request that waited for a slot while the client closed: retried on fresh connections
            raise Dropped(f"the connections to {self.host} were closed (LLM.aclose)")
        try:
            async with asyncio.timeout_at(deadline):
                conn = await self._open()
        except TimeoutError:
            raise TimeoutError(f"connecting to {self.host}:{self.port}") from None
        if self.closed:  # closed while this one connected
            conn.abandon()
            raise Dropped(f"the connections to {self.host} were closed (LLM.aclose)")
        return conn

    async def _open(self) -> _Connection:
        loop = self.loop
        if loop.time() - self.resolved_at > DNS_TTL_S:
            try:
                infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError) as exc:  # socket.gaierror: no such host
                raise ConnectFailed(exc if isinstance(exc, OSError) else OSError(str(exc))) from None
            self.addresses = [(family, address) for family, _, _, _, address in infos]
            self.resolved_at = loop.time()
        if len(self.addresses) == 1:
            return await self._open_to(*self.addresses[0])
        return await self._first_open()

    async def _first_open(self) -> _Connection:
        """Connect to the host's addresses in the resolver's order, the next one started beside the ones tried
        while none has answered for NEXT_ADDRESS_S; return the first connection, close any other."""
        todo, tries, errors = list(self.addresses), set(), []
        try:
            while todo or tries:
                if todo:
                    tries.add(self.loop.create_task(self._open_to(*todo.pop(0))))
                done, tries = await asyncio.wait(tries, timeout=NEXT_ADDRESS_S if todo else None,
                                                 return_when=asyncio.FIRST_COMPLETED)
                opened = [t.result() for t in done if t.exception() is None]
                errors += [t.exception() for t in done if t.exception() is not None]
                for extra in opened[1:]:
                    extra.abandon()
                if opened:
                    return opened[0]
        finally:  # a connect still under way when one answered, or when the deadline or a cancel came: stopped,
            for task in tries:  # and closed if it connected all the same (in the turn the wait was interrupted)
                task.cancel()
                task.add_done_callback(_closed_if_opened)
        raise errors[-1] if errors else ConnectFailed(OSError(f"no address for {self.host}"))

    async def _open_to(self, family: int, address: Any) -> _Connection:
        try:
            _, conn = await self.loop.create_connection(lambda: _Connection(self), address[0], address[1],
                                                        family=family, ssl=self.tls,
                                                        server_hostname=self.host if self.tls else None)
        except OSError as exc:  # refused, unreachable, a certificate that does not verify (ssl.SSLError)
            raise ConnectFailed(exc) from None
        self.open.add(conn)
        return conn


def _closed_if_opened(task: asyncio.Task) -> None:
    """Close the connection a connect left behind once it was not wanted (its failure is read, not logged)."""
    if not task.cancelled() and task.exception() is None:
        task.result().abandon()


class _Connection(asyncio.Protocol):
    """One connection: at most one request on it at a time, its reply parsed as its bytes arrive."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self.transport: Any = None
        self.lost = False
        self.aborted = False  # closed by this side: its end of stream never ends a reply
        self.idle_since = 0.0
        self.waiter: asyncio.Future | None = None
        self.timer: asyncio.TimerHandle | None = None
        self._reset()

    def _reset(self) -> None:
        self.buf = bytearray()
        self.status = 0  # 0 until the head is read
        self.headers: dict[str, str] | None = None  # kept for a status other than 200
        self.length: int | None = None  # Content-Length; None: chunked or read to the close
        self.chunks: list[bytes] | None = None  # chunked: the data so far, from self.pos on unread
        self.pos = 0
        self.encoding = ""
        self.reusable = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def send(self, data: bytes, deadline: float) -> asyncio.Future:
        """Write one request; return the future of its reply. Raise Dropped if the connection is already gone
        (a server that closed or spoke first as it accepted: no reply can come on it)."""
        if self.lost or self.aborted or self.transport.is_closing():
            raise Dropped("the server closed the connection before the request was sent")
        try:
            self.transport.write(data)
        except RuntimeError as exc:  # uvloop: the handle closed in this same turn
            self.abandon()
            raise Dropped(f"the connection closed as the request was sent ({exc})") from None
        loop = self.endpoint.loop
        self.waiter = waiter = loop.create_future()
        self.timer = loop.call_at(deadline, self._expire)
        return waiter

    def abandon(self) -> None:
        """Close the connection at once (its state unknown: nothing more is sent or read on it)."""
        self.aborted = True
        if not self.lost:
            self.transport.abort()

    def fail(self, exc: BaseException) -> None:
        """End the request on this connection (if any) with ``exc``."""
        waiter, self.waiter = self.waiter, None
        if self.timer is not None:
            self.timer.cancel()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _expire(self) -> None:
        self.fail(TimeoutError())
        self.abandon()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.endpoint.forget(self)
        if self.waiter is None:
            return
        if exc is None and not self.aborted and self.status and self.length is None and self.chunks is None:
            self._done(bytes(self.buf))  # a reply without a length ends with its connection closed (not reset)
        else:
            self.fail(Dropped(f"the server closed the connection {'mid-reply' if self.status else 'before replying'}"
                              + (f" ({exc})" if exc else "")))

    def eof_received(self) -> bool:
        return False  # the server is done: close our half too (then connection_lost)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:  # bytes nobody asked for: no request can follow them on this connection
            self.abandon()
            return
        self.buf += data
        try:
            if not self.status and not self._head():
                return
            if self.chunks is not None:
                body = self._unchunked()
            elif self.length is not None and len(self.buf) >= self.length:
                if len(self.buf) > self.length:
                    self.reusable = False  # more than the reply: the connection is out of step
                body = bytes(self.buf[:self.length])
            else:
                return
        except ValueError as exc:
            self.fail(Dropped(f"the server's reply is not HTTP/1.1 ({exc})"))
            self.abandon()
            return
        if body is not None:
            self._done(body)

    def _head(self) -> bool:
        """Read the status and headers once they are all in; return False while they are not."""
        while True:  # past any interim reply (100 Continue, 103 Early Hints): the real one follows it
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > _MAX_HEAD:
                    raise ValueError(f"no end of the reply head in {_MAX_HEAD} bytes")
                return False
            lines = self.buf[:end].decode("latin-1").split("\r\n")
            del self.buf[:end + 4]
            version, _, rest = lines[0].partition(" ")
            if not version.startswith("HTTP/1.") or not rest[:3].isdigit() or rest[3:4] not in ("", " "):
                raise ValueError(f"status line {lines[0][:40]!r}")
            status = int(rest[:3])
            if not 100 <= status < 200:
                break
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.status = status
        self.headers = headers if status != 200 else None
        self.encoding = headers.get("content-encoding", "").lower()
        self.reusable = version == "HTTP/1.1" and "close" not in (
            token.strip() for token in headers.get("connection", "").lower().split(","))
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.chunks = []
        elif "content-length" in headers:
            if not headers["content-length"].isdigit() or not headers["content-length"].isascii():
                raise ValueError(f"Content-Length {headers['content-length'][:20]!r}")
            self.length = int(headers["content-length"])
        elif status in (204, 304):
            self.length = 0
        else:
            self.reusable = False  # read to the close
        return True

    def _unchunked(self) -> bytes | None:
        """Return the chunked body once its last chunk is in, else None (the chunks so far kept)."""
        buf, pos, chunks = self.buf, self.pos, self.chunks
        assert chunks is not None
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if len(buf) - pos > _MAX_HEAD:
                    raise ValueError("a chunk size line without its end")
                return None
            size_text = bytes(buf[pos:eol]).split(b";")[0].strip()
            if not _HEX.fullmatch(size_text):
                raise ValueError(f"chunk size {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                end = buf.find(b"\r\n\r\n", eol)  # past the trailers, if any
                if end < 0:
                    return None
                if len(buf) > end + 4:
                    self.reusable = False
                return b"".join(chunks)
            if len(buf) < eol + 4 + size:
                return None
            if buf[eol + 2 + size:eol + 4 + size] != b"\r\n":
                raise ValueError("a chunk longer than its size")
            chunks.append(bytes(buf[eol + 2:eol + 2 + size]))
            self.pos = pos = eol + 4 + size

    def _done(self, body: bytes) -> None:
        waiter, status, headers = self.waiter, self.status, self.headers
        if self.encoding in ("gzip", "x-gzip", "deflate") and body:
            try:  # asked for identity; a server that compresses anyway is read still
                body = _decompressed(body, self.encoding)
            except (zlib.error, OSError, EOFError) as exc:  # gzip's: BadGzipFile (an OSError), EOFError
                self.fail(Dropped(f"the reply's {self.encoding} body does not decompress ({exc})"))
                self.abandon()
                return
        self.waiter = None
        if self.timer is not None:
            self.timer.cancel()
        if self.reusable and not self.lost and not self.aborted and not self.endpoint.closed:
            self._reset()
            self.idle_since = self.endpoint.loop.time()
            self.endpoint.idle.append(self)
        else:
            self.abandon()
        if waiter is not None and not waiter.done():
            waiter.set_result((status, headers, body))


def _decompressed(body: bytes, encoding: str) -> bytes:
    """Return a gzip (every member) or deflate body decompressed (deflate: zlib-wrapped as the RFC says, or raw
    as some servers send it)."""
    if encoding != "deflate":
        return gzip.decompress(body)
    try:
        return zlib.decompress(body)
    except zlib.error:
        return zlib.decompress(body, -15)
