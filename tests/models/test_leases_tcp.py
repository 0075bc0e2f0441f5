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
