"""Where a request's Python work goes: bytecodes executed per request, by module and by function, for the LLM seam
and a bare aiohttp client side by side (the clients of benchmarks/throughput.py, against the same fake provider).

Timings on a shared machine move by 10–30% between rounds (benchmarks/throughput.py interleaves rounds and reports
medians for that reason); a count of the bytecodes each request executes does not move, so a change to the seam's
Python work shows here in one run, to the bytecode. It counts the interpreter's work only: what runs in C (orjson,
hashing, aiohttp's HTTP parser, uvloop) is not in it, which is what benchmarks/throughput.py's CPU times add.
Each client warms up with 2 × concurrency requests, then its n requests and its close are
counted on every thread.

    python benchmarks/seam_profile.py                  # n = 500, 50 in flight, 0 ms latency
    python benchmarks/seam_profile.py --top 40 --clients bench,bench-uncached,aiohttp

The last line is one JSON object: bytecodes per request of each client, and the seam's ratio to the bare client.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import threading
from collections import Counter

from throughput import CLIENTS  # the same clients, on the same event loop kind

from bench.models.eventloop import loop_kind
from bench.testing.fake_provider import FakeProvider


def count(name: str, url: str, n: int, conc: int, cache_dir: str, loop: str) -> Counter:
    """Return the bytecodes the n requests of client ``name`` (and its close) executed, by (file, function)."""
    counts: Counter = Counter()

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202 (sys.settrace's signature)
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            counts[(code.co_filename, code.co_name)] += 1
        return tracer

    async def run() -> None:
        threading.settrace(tracer)  # threads the client starts are counted too
        try:
            send, close = CLIENTS[name](url, conc, cache_dir)
            await asyncio.gather(*(send(-1 - i) for i in range(2 * conc)))
            gc.collect()
            counts.clear()  # the warm-up's work is not counted, the writer's tracer stays
            sys.settrace(tracer)  # the tasks made below run new frames: traced
            try:
                await asyncio.gather(*(send(i) for i in range(n)))
                await close()
            finally:
                sys.settrace(None)
        finally:
            threading.settrace(None)  # type: ignore[arg-type]

    factory = None
    if loop == "uvloop":
        import uvloop  # noqa: PLC0415 (the perf extra)

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(run())
    return counts


def where(path: str) -> str:
    """Return a file's short name: its package path (site-packages, the standard library, this checkout)."""
    for mark in ("site-packages/", "/lib/python3.11/", "/benchmarks/", "/bench/"):
        if mark in path:
            tail = path.split(mark, 1)[1]
            return {"/benchmarks/": "benchmarks/", "/bench/": "bench/"}.get(mark, "") + tail
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--clients", default="bench,aiohttp", help="comma-separated, of: " + ", ".join(CLIENTS))
    ap.add_argument("--top", type=int, default=25, help="functions of bench listed, most work first")
    ap.add_argument("--loop", choices=("uvloop", "asyncio"), default=loop_kind())
    args = ap.parse_args()
    names = [c.strip() for c in args.clients.split(",") if c.strip()]
    if unknown := sorted(set(names) - set(CLIENTS)):
        ap.error(f"unknown client(s) {', '.join(unknown)}; choose from {', '.join(CLIENTS)}")
    per_request: dict[str, float] = {}
    with FakeProvider(latency_ms=args.latency_ms) as fake, tempfile.TemporaryDirectory() as tmp:
        for name in names:
            counts = count(name, fake.url, args.n, args.concurrency, f"{tmp}/{name}", args.loop)
            per_request[name] = sum(counts.values()) / args.n
            by_module: Counter = Counter()
            for (path, _), c in counts.items():
                by_module[where(path)] += c
            print(f"{name}: {per_request[name]:.0f} bytecodes a request ({args.loop}, {args.concurrency} in flight)")
            for module, c in by_module.most_common(12):
                print(f"  {c / args.n:8.1f}  {module}")
            own = sorted(((c, f"{where(p)}:{fn}") for (p, fn), c in counts.items() if "/bench/" in p), reverse=True)
            if own:
                print(f"  of which bench's own, {sum(c for c, _ in own) / args.n:.0f}; by function:")
                for c, fn in own[:args.top]:
                    print(f"    {c / args.n:8.1f}  {fn}")
    out = {"bytecodes_per_request": {k: round(v) for k, v in per_request.items()}}
    if "bench" in per_request and "aiohttp" in per_request:
        out["ratio"] = round(per_request["bench"] / per_request["aiohttp"], 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
