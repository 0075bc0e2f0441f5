"""The direct transport's HTTP/1.1 client: one ``Endpoint`` per route and event loop keeps its connections
alive and sends each request as one write, its reply read into ``(status, headers, body)`` (the headers only for
a status other than 200) by a protocol per connection (``bench.models._http_connection``).

Why not aiohttp's ``ClientSession``: per request it builds a request and a response object, a header
multidict, a stream reader, timers and trace hooks, about 3,800 bytecodes of which a chat completion needs a
few hundred (``benchmarks/seam_profile.py`` counts them; docs/llm-seam.md has the figures). What it does that an
OpenAI-compatible endpoint needs is here: http and https (the system's certificates, as aiohttp; a private CA
through ``SSL_CERT_FILE``), the framings, encodings and keep-alive a server may choose (read by the
connection), a total timeout per request (connecting included), DNS answers kept five minutes, a host's next
address tried 250 ms into a connect that has not answered (as aiohttp's connector), an idle connection older
than 15 s closed instead of reused (as aiohttp's, before a NAT or a load balancer forgets it). The key lives in
the request head, in memory only.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from bench.models._http_connection import Connection, Dropped

Response = tuple[int, "dict[str, str] | None", bytes]  # status, the headers (lower-case names; None on a 200), body

DNS_TTL_S = 300.0  # as the aiohttp connector bench used before (ttl_dns_cache=300)
NEXT_ADDRESS_S = 0.25  # a connect not answered by then: the host's next address is tried beside it (happy eyeballs)
IDLE_S = 15.0  # an idle connection older than this is closed, not reused (aiohttp's keepalive_timeout)
_TLS: list[ssl.SSLContext] = []  # the default context, made on the first https connection (~20 ms: it loads the CAs)


class ConnectFailed(Exception):
    """No connection to the endpoint (refused, no such host, a certificate that does not verify)."""

    def __init__(self, os_error: OSError):
        super().__init__(str(os_error))
        self.os_error = os_error


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
        self.idle: list[Connection] = []  # kept alive, the most recently used last
        self.open: set[Connection] = set()
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

    def forget(self, conn: Connection) -> None:
        self.open.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)

    def _reusable(self) -> Connection | None:
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

    async def _connect(self, deadline: float) -> Connection:
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

    async def _open(self) -> Connection:
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

    async def _first_open(self) -> Connection:
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

    async def _open_to(self, family: int, address: Any) -> Connection:
        try:
            _, conn = await self.loop.create_connection(lambda: Connection(self), address[0], address[1],
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
