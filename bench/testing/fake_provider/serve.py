"""The fake provider as a process: ``python -m bench.testing.fake_provider --port 0 [--latency-ms 100]
[--config JSON] [--parent-pid PID]`` prints ``{"port": N}`` when ready and serves until signalled or orphaned."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import signal
import sys

from aiohttp import web

from bench.testing.fake_provider.app import build_app
from bench.testing.fake_provider.server import FakeServer


def is_loopback(host: str) -> bool:
    """Whether ``host`` names a loopback interface."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve(host: str, port: int, server: FakeServer, parent_pid: int | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or until the parent process is gone); print the port line first."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before the port line: a signal may follow it at once
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(build_app(server), access_log=None, handler_cancellation=True,
                           shutdown_timeout=0.25)
    await runner.setup()
    await web.TCPSite(runner, host, port, backlog=4096).start()
    sys.stdout.write(json.dumps({"port": runner.addresses[0][1]}) + "\n")
    sys.stdout.flush()
    watchdog = asyncio.create_task(watch_parent(parent_pid, stop)) if parent_pid else None
    try:
        await stop.wait()
    finally:
        if watchdog is not None:
            watchdog.cancel()
        await runner.cleanup()


async def watch_parent(parent_pid: int, stop: asyncio.Event) -> None:
    """Set ``stop`` once this process is orphaned (the parent died without stopping us)."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(0.5)
    stop.set()


def main(argv: list[str] | None = None) -> int:
    """Script entry point."""
    parser = argparse.ArgumentParser(description="Loopback OpenAI-compatible fake provider.")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="default latency")
    parser.add_argument("--config", default="{}", help="JSON object of config keys")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this parent is gone")
    args = parser.parse_args(argv)
    if not is_loopback(args.host):
        print(f"fakeprovider: refusing to bind non-loopback host {args.host!r}", file=sys.stderr)
        return 2
    try:
        server = FakeServer(args.latency_ms, json.loads(args.config))
    except (ValueError, TypeError) as exc:
        print(f"fakeprovider: bad --config: {exc}", file=sys.stderr)
        return 2
    asyncio.run(serve(args.host, args.port, server, args.parent_pid))
    return 0
