"""The direct transport's HTTP: one aiohttp session per route and event loop POSTs chat completions.

It guards against a hostile or broken server: no redirect followed (the key would go along), a reply over
``limits.max_reply_mb`` (raw or decompressed), conflicting lengths and unknown codings refused (a final ``Refused``).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from bench.core.http_get import loopback

STEP = 256 * 1024  # decompressed bytes per step: the event loop runs other requests between steps
_CODINGS = {"gzip": 47, "x-gzip": 47, "deflate": 15}  # zlib's wbits (47: a gzip or zlib header, found by zlib)

Response = tuple[int, Any, bytes]  # status, the headers (a case-insensitive multidict), the body


class Refused(Exception):
    """A reply bench will not read: over the size bound, conflicting lengths, an unknown or corrupt coding."""


class Endpoint:
    """POSTs to one URL on its own session (its headers, the key among them, held in memory only)."""

    def __init__(self, url: str, headers: dict[str, str], max_bytes: int):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http:// or https:// URL; write the api_base as http://host:port/v1")
        if any("\r" in v or "\n" in v for v in headers.values()):
            raise ValueError(f"a header for {parts.hostname} holds a line break (check the key variable's value)")
        self.url = url
        self.max_bytes = max_bytes
        self.session = aiohttp.ClientSession(
            headers=headers, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300))  # the process cap holds what is in flight
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self.proxy, self.proxy_auth = env_proxy(url)

    async def post(self, body: bytes, timeout_s: float) -> Response:
        """Send ``body``; return the reply. Raise aiohttp's errors, TimeoutError, or Refused."""
        if self.session.closed:  # a request that waited for a slot while the client closed: retried on a new one
            raise aiohttp.ClientConnectionError(f"its session to {self.url} was closed (LLM.aclose)")
        timeout = self._timeouts.get(timeout_s)
        if timeout is None:
            timeout = self._timeouts[timeout_s] = aiohttp.ClientTimeout(total=timeout_s)
        resp = await self.session.post(self.url, data=body, allow_redirects=False, timeout=timeout, proxy=self.proxy,
                                       proxy_auth=self.proxy_auth)
        try:
            return resp.status, resp.headers, await read_bounded(resp, self.max_bytes)
        finally:
            resp.release()  # the body read whole: the connection is kept; else it is closed

    async def close(self) -> None:
        await self.session.close()


def env_proxy(url: str) -> tuple[Any, Any]:
    """Return (proxy, credentials) the environment names for ``url`` (never for loopback), or (None, None)."""
    if loopback(urlsplit(url).hostname):
        return None, None
    try:
        return get_env_proxy_for_url(URL(url))
    except LookupError:
        return None, None


async def read_bounded(resp: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """Return the reply's body, decompressed; raise Refused once over ``max_bytes`` or unreadable as HTTP says."""
    headers = resp.headers
    length = resp.content_length
    if length is not None:
        if len(set(headers.getall("Content-Length"))) > 1:  # aiohttp's C parser refuses them; its Python one does not
            raise Refused("conflicting Content-Length headers")
        if length > max_bytes:
            raise Refused(f"its Content-Length of {length} bytes is over the bound of {max_bytes} (limits.max_reply_mb)")
    coded = "Content-Encoding" in headers or "Transfer-Encoding" in headers
    decoders = _decoders(headers) if coded else []
    if not decoders and length is not None:
        return await resp.read()  # the common reply: its length checked above
    out: list[bytes] = []
    raw = size = 0
    async for data in resp.content.iter_any():
        raw += len(data)
        if raw > max_bytes:
            raise Refused(f"more than {max_bytes} bytes (limits.max_reply_mb)")
        for piece in _through(decoders, data):
            size += len(piece)
            if size > max_bytes:
                raise Refused(f"more than {max_bytes} bytes once decompressed (limits.max_reply_mb)")
            out.append(piece)
            if decoders:
                await asyncio.sleep(0)  # one piece of a large inflation at a time: other requests go on
    return b"".join(out)


def _decoders(headers: Any) -> list[_Inflater]:
    """Return the decoders that undo a reply's codings, in order: transfer codings (but chunked), then content's."""
    names: list[str] = []
    for header in ("Transfer-Encoding", "Content-Encoding"):
        listed = [c.strip().lower() for v in headers.getall(header, ()) for c in v.split(",")]
        names += reversed([c for c in listed if c not in ("", "identity", "chunked")])
    unknown = [n for n in names if n not in _CODINGS]
    if unknown:
        raise Refused(f"it is encoded as {', '.join(unknown)}, which bench does not read (it asks for identity)")
    return [_Inflater(n) for n in names]


class _Inflater:
    """Decompresses one coding a bounded piece at a time (multi-member gzip, deflate with or without zlib wrapper)."""

    def __init__(self, coding: str):
        self.coding = coding
        self.wbits = _CODINGS[coding]
        self.d: Any = None

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self.d is None:
            if self.wbits == 15 and data and (data[0] & 0x0F != 8 or int.from_bytes(data[:2], "big") % 31):
                self.wbits = -15  # raw deflate, without the zlib header the RFC asks for
            self.d = zlib.decompressobj(self.wbits)
        try:
            while True:
                piece = self.d.decompress(data, STEP)
                data = self.d.unconsumed_tail
                if self.d.eof and self.d.unused_data:  # the next gzip member
                    data, self.d = self.d.unused_data, zlib.decompressobj(self.wbits)
                if piece:
                    yield piece
                if not data and len(piece) < STEP:
                    return
        except zlib.error as exc:
            raise Refused(f"its {self.coding} body does not decompress ({exc})") from None


def _through(decoders: list[_Inflater], data: bytes) -> Iterator[bytes]:
    """Yield ``data`` through each decoder in turn, in pieces of at most STEP bytes."""
    if not decoders:
        yield data
        return
    for piece in decoders[0].feed(data):
        yield from _through(decoders[1:], piece)
