"""One kept-alive HTTP/1.1 connection of bench's client (``bench.models._http``): a protocol that writes a request
and parses its reply as the bytes arrive into ``(status, headers, body)``: a Content-Length, chunked (extensions,
trailers) or read-to-close body, gzip (every member) or deflate, interim 1xx replies skipped; keep-alive unless the
server says ``Connection: close`` or speaks HTTP/1.0. A connection whose reply was not read whole (a timeout, a
cancel, a drop, a close, bytes past the reply, a malformed head or chunk) is closed, never reused; a reply is never
taken from a connection reset or closed by this side (over TLS, a close without TLS's own close_notify still ends
a read-to-close reply, as it did with aiohttp: asyncio's TLS layer does not tell them apart).

Its endpoint (``_http.Endpoint``) gives it the event loop (``loop``), takes it back when a reply is read whole
(``idle``), forgets it when it closes (``forget``) and says when the client is closed (``closed``).
"""

from __future__ import annotations

import asyncio
import gzip
import re
import zlib
from typing import Any

_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_MAX_HEAD = 65536  # a reply head past this is no HTTP server's: the connection is dropped


class Dropped(Exception):
    """The connection closed, or the server broke HTTP, before the whole reply was read."""


class Connection(asyncio.Protocol):
    """One connection: at most one request on it at a time, its reply parsed as its bytes arrive."""

    def __init__(self, endpoint: Any):
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
                body = decompressed(body, self.encoding)
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


def decompressed(body: bytes, encoding: str) -> bytes:
    """Return a gzip (every member) or deflate body decompressed (deflate: zlib-wrapped as the RFC says, or raw
    as some servers send it)."""
    if encoding != "deflate":
        return gzip.decompress(body)
    try:
        return zlib.decompress(body)
    except zlib.error:
        return zlib.decompress(body, -15)
