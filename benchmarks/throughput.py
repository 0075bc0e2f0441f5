"""Throughput and CPU per request of the LLM seam against a bare client, side by side in one run.

The clients send the same N distinct requests at the same concurrency to the same loopback fake
provider (a separate process, so client CPU is measured alone), on the same event loop kind:
  bench    bench.models.client.LLM (cap, retries, response cache on, cost, usage records)
  aiohttp  a bare aiohttp client with one session (the near-limit baseline)
  litellm  plain litellm.acompletion + one semaphore + asyncio.gather (the common pattern; opt in with
           --clients, it takes 5 ms of CPU per request)
  bench-uncached  the seam with its response cache off (opt in: what the cache costs)
For every latency × concurrency: requests/s, its ratio to the physical limit (concurrency / latency) and
client CPU ms per request, in interleaved rounds. The last line is one JSON object for scripts: the
seam's ratios to the bare client (``cpu_ratio``: CPU per request, ``rps_ratio``: requests/s), each
the median over rounds of the ratio within a round (both clients measured minutes apart at most).

    python benchmarks/throughput.py                                   # latency 0 and 100 ms × concurrency 50 and 200
    python benchmarks/throughput.py --latency-ms 100 --concurrency 50 --clients bench,litellm,aiohttp
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import tempfile
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.models.eventloop import loop_kind  # noqa: E402
from bench.testing.fake_provider import FakeProvider  # noqa: E402


def _messages(i: int, tag: str) -> list[dict]:
    return [{"role": "user", "content": f"{tag} request {i}: give one tip."}]


def _client_bench(url: str, conc: int, cache_dir: str | None):
    """Return (send(i), close()) for bench.models.client: cap, retries, cache (on, in a temp dir), usage, cost."""
    from bench.models.client import LLM, Limits
    from bench.models.routing import ModelSpec

    cache = os.path.join(cache_dir, "responses") if cache_dir is not None else None
    llm = LLM(Limits(max_concurrency=conc, timeout_s=30), cache=cache)
    spec = ModelSpec("openai/fake-model", api_base=url, params={"max_tokens": 16})

    async def send(i: int) -> None:
        assert (await llm.complete(spec, _messages(i, "bench"))).text

    return send, llm.aclose


def _client_litellm(url: str, conc: int, cache_dir: str):
    """Return (send(i), close()) for plain litellm.acompletion behind one semaphore."""
    import litellm as lm  # noqa: PLC0415 (seconds to import: only this client needs it)

    lm.suppress_debug_info = True  # quiet, as bench keeps it (its price map stays local: the setting above)
    sem = asyncio.Semaphore(conc)

    async def send(i: int) -> None:
        async with sem:
            resp = await lm.acompletion(model="openai/fake-model", api_base=url, api_key="not-needed",
                                        messages=_messages(i, "litellm"), max_tokens=16)
            assert resp.choices[0].message.content

    async def close() -> None:
        return None

    return send, close


def _client_aiohttp(url: str, conc: int, cache_dir: str):
    """Return (send(i), close()) for a bare aiohttp client with one session (the near-limit baseline)."""
    import aiohttp

    sem = asyncio.Semaphore(conc)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def send(i: int) -> None:
        body = {"model": "fake-model", "messages": _messages(i, "aiohttp"), "max_tokens": 16}
        async with sem, session.post(f"{url}/chat/completions", json=body) as resp:
            assert (await resp.json())["choices"][0]["message"]["content"]

    return send, session.close


def _client_bench_uncached(url: str, conc: int, cache_dir: str):
    """Return (send(i), close()) for bench.models.client without its response cache (to see what the cache costs)."""
    return _client_bench(url, conc, None)


CLIENTS = {"bench": _client_bench, "litellm": _client_litellm, "aiohttp": _client_aiohttp,
           "bench-uncached": _client_bench_uncached}


def measure(factory, url: str, n: int, conc: int, cache_dir: str, loop: str) -> tuple[float, float]:
    """Return (requests/s, client CPU ms per request) in steady state, on a new event loop of kind ``loop``.

    Each client warms up (imports, connections, first-call costs) with 2×concurrency
    requests in the same event loop, then (after a full garbage collection, so that no client pays
    for the garbage of the one measured before it) sends the n timed requests; all clients are
    measured the same way. CPU is the process's (every thread), up to
    and including the client's close.
    """
    async def run() -> tuple[float, float]:
        send, close = factory(url, conc, cache_dir)
        await asyncio.gather(*(send(-1 - i) for i in range(2 * conc)))
        gc.collect()  # each client starts from an empty young generation: none pays for the one measured before it
        wall0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(send(i) for i in range(n)))
        wall = time.perf_counter() - wall0
        await close()  # counted: what a client leaves to do at its end
        return n / wall, 1000 * (time.process_time() - cpu0) / n

    os.makedirs(cache_dir, exist_ok=True)
    factory_of_loop = None
    if loop == "uvloop":
        import uvloop

        factory_of_loop = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory_of_loop) as runner:
        return runner.run(run())


def run_config(names: list[str], latency_ms: float, conc: int, args, tmp: str) -> dict[str, list[tuple[float, float]]]:
    """Return each client's (requests/s, CPU ms per request) per round at one latency and concurrency."""
    limit = conc / (latency_ms / 1000) if latency_ms else None
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    with FakeProvider(latency_ms=latency_ms) as fake:
        print(f"latency={latency_ms:g} ms concurrency={conc} n={args.n} "
              f"limit={f'{limit:.0f} req/s' if limit else 'none (CPU-bound)'}", flush=True)
        for r in range(args.rounds):
            for name in names:
                where = os.path.join(tmp, f"{name}-{latency_ms:g}-{conc}-{r}")
                rps, cpu_ms = measure(CLIENTS[name], fake.url, args.n, conc, where, args.loop)
                runs[name].append((rps, cpu_ms))
                share = f"{rps / limit:5.2f} of limit  " if limit else ""
                print(f"  round {r + 1} {name:8s} {rps:8.1f} req/s  {share}{cpu_ms:6.3f} ms CPU/request", flush=True)
    return runs


def summary(runs: dict[tuple[float, int], dict[str, list[tuple[float, float]]]]) -> dict:
    """Return the final JSON: per latency and concurrency the medians, and bench's paired ratios to aiohttp."""
    out: dict = {"configs": {}, "cpu_ratio": {}, "rps_ratio": {}}
    for (latency_ms, conc), by_client in runs.items():
        tag = f"{latency_ms:g}ms_c{conc}"
        out["configs"][tag] = {f"{name}_{what}": round(statistics.median(x[i] for x in rounds), 4 if i else 1)
                               for name, rounds in by_client.items() for i, what in enumerate(("rps", "cpu_ms"))}
        if "bench" in by_client and "aiohttp" in by_client:
            pairs = list(zip(by_client["bench"], by_client["aiohttp"]))
            out["cpu_ratio"][tag] = round(statistics.median(b[1] / a[1] for b, a in pairs), 3)
            out["rps_ratio"][tag] = round(statistics.median(b[0] / a[0] for b, a in pairs), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[50, 200])
    ap.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 100.0])
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds per client; medians are reported (shared machines are noisy)")
    ap.add_argument("--clients", default="bench,aiohttp", help="comma-separated, of: " + ", ".join(CLIENTS))
    ap.add_argument("--loop", choices=("uvloop", "asyncio"), default=loop_kind(),
                    help="the event loop every client runs on (default: uvloop where it is installed)")
    args = ap.parse_args()
    names = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = sorted(set(names) - set(CLIENTS))
    if unknown:
        ap.error(f"unknown client(s) {', '.join(unknown)}; choose from {', '.join(CLIENTS)}")
    print(f"{args.loop} event loop for every client, {args.rounds} interleaved rounds, "
          f"fake provider in its own process", flush=True)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for latency_ms in args.latency_ms:
            for conc in args.concurrency:
                runs[(latency_ms, conc)] = run_config(names, latency_ms, conc, args, tmp)
    result = summary(runs)
    print("medians, and bench / aiohttp (median over rounds of the ratio within a round):")
    for tag, med in result["configs"].items():
        ratios = (f"  CPU ratio {result['cpu_ratio'][tag]:.3f}  rps ratio {result['rps_ratio'][tag]:.3f}"
                  if tag in result["cpu_ratio"] else "")
        print(f"  {tag:12s} " + "  ".join(f"{k} {v}" for k, v in med.items()) + ratios)
    print(json.dumps({"loop": args.loop, "n": args.n, "rounds": args.rounds, **result}))


if __name__ == "__main__":
    main()
