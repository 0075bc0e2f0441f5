"""A cluster sweep's lease server on TCP: its caps hold for every client, and only the sweep's token gets leases."""

import asyncio

import pytest

from bench.core.errors import BenchError
from bench.models.ratelimit import TOKEN_ENV, Caps, LeaseServer, RemoteLimiter


def test_tcp_lease_server_binds_loopback_and_holds_a_cap_across_clients(monkeypatch):
    with LeaseServer(window_s=60, host="127.0.0.1") as server:
        assert server.address.startswith("tcp:127.0.0.1:")
        monkeypatch.setenv(TOKEN_ENV, server.token)

        async def main():
            a, b = RemoteLimiter(server.address), RemoteLimiter(server.address)
            first = await a.acquire("m @ x", Caps(max_concurrency=1))
            waiting = asyncio.ensure_future(b.acquire("m @ x", Caps(max_concurrency=1)))
            done, _ = await asyncio.wait([waiting], timeout=0.5)
            assert not done  # the cap is one, whichever process asks
            a.release(first)
            second = await asyncio.wait_for(waiting, timeout=10)
            b.release(second)

        asyncio.run(main())


@pytest.mark.parametrize("token", ["", "not-the-token"])
def test_a_client_without_the_sweeps_token_gets_no_lease(monkeypatch, token):
    with LeaseServer(window_s=60, host="127.0.0.1") as server:
        monkeypatch.setenv(TOKEN_ENV, token)

        async def main():
            with pytest.raises(BenchError, match="closed the connection"):
                await asyncio.wait_for(RemoteLimiter(server.address).acquire("m @ x", Caps(max_concurrency=5)), 10)

        asyncio.run(main())


def test_idle_strangers_cannot_hold_the_servers_connections(monkeypatch):
    # 300 connections that never show the token: the server keeps at most MAX_UNPROVEN of them (a newcomer
    # closes the longest-waiting one), closes the rest once HELLO_S has passed, and still serves the sweep
    import socket
    import time

    import psutil

    from bench.models import _leases

    bound, hello_s = getattr(_leases, "MAX_UNPROVEN", 32), getattr(_leases, "HELLO_S", 5.0)

    with LeaseServer(window_s=60, host="127.0.0.1") as server:
        port = int(server.address.rpartition(":")[2])
        monkeypatch.setenv(TOKEN_ENV, server.token)
        strangers = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(300)]
        theirs = {s.getsockname()[1] for s in strangers}

        def held(peers: set[int] | None = None) -> int:  # the server's own end of each connection it still holds
            return sum(1 for c in psutil.Process().net_connections("tcp")
                       if c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED
                       and (peers is None or c.raddr.port in peers))

        async def main():  # accepted after every stranger (the backlog is first in, first out)
            limiter = RemoteLimiter(server.address)
            lease = await asyncio.wait_for(limiter.acquire("m @ x", Caps(max_concurrency=1)), 30)
            limiter.release(lease)
            return held()

        try:
            assert asyncio.run(main()) <= bound + 1
            # the strangers' connections only: the limiter's ends when the garbage collector frees the
            # RemoteLimiter (closing its loop closes no transport on it), not when this test looks
            deadline = time.monotonic() + hello_s + 60
            while held(theirs) > 0 and time.monotonic() < deadline:  # readiness: the idle ones are closed
                time.sleep(0.1)
            assert held(theirs) == 0  # no stranger is left
        finally:
            for s in strangers:
                s.close()
