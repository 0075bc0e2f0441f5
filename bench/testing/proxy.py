"""A loopback HTTP forward proxy for tests, mapping unresolvable hosts (``provider.invalid:PORT``) onto loopback
servers: an api_base only it can reach is reached through ``HTTP_PROXY`` or not at all. Plain http, in a thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class Proxy:
    routes: dict[str, tuple[str, int]]  # "host:port" as asked → the loopback address that answers for it
    url: str = ""  # http://127.0.0.1:PORT, once it listens
    asked: list[str] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line, *headers = head[:-4].decode("latin-1").split("\r\n")
            method, target, version = line.split(" ", 2)
            self.asked.append(target)
            url = urlsplit(target)
            dest = self.routes.get(url.netloc)
            if dest is None:
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            length = next((int(h.split(":", 1)[1]) for h in headers if h.lower().startswith("content-length:")), 0)
            body = await reader.readexactly(length)
            kept = [h for h in headers if not h.lower().startswith(("connection:", "proxy-connection:"))]
            path = url.path + (f"?{url.query}" if url.query else "")
            up_reader, up_writer = await asyncio.open_connection(*dest)
            up_writer.write("\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
                            .encode("latin-1") + body)
            while data := await up_reader.read(65536):  # the reply, to its close
                writer.write(data)
                await writer.drain()
            up_writer.close()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()


@contextmanager
def forwarding_proxy(routes: dict[str, tuple[str, int]]) -> Iterator[Proxy]:
    """Run a :class:`Proxy` for ``routes`` on 127.0.0.1 in a thread of its own; yield it once it listens."""
    proxy, ready, loop = Proxy(routes), threading.Event(), asyncio.new_event_loop()
    stop: asyncio.Future | None = None

    async def main() -> None:
        nonlocal stop
        server = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
        proxy.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        stop = loop.create_future()
        ready.set()
        async with server:
            await stop

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    ready.wait(30)
    try:
        yield proxy
    finally:
        loop.call_soon_threadsafe(lambda: stop.done() or stop.set_result(None))  # type: ignore[union-attr]
        thread.join(30)
        loop.close()
