"""Throughput of the LLM seam against the loopback fake provider, side by side in one run.

Three clients send the same N distinct requests at the same concurrency to the same
fake provider (a separate process, so client CPU is measured alone):
  bench    bench.models.client.LLM (cap, retries, response cache on, cost, usage records)
  litellm  plain litellm.acompletion + one semaphore + asyncio.gather (the common pattern)
  aiohttp  a bare aiohttp client with one session (the near-limit baseline)
For each: requests/s, its ratio to the physical limit (concurrency / latency) and client
CPU ms per request. The last line is one JSON object for scripts.

    python benchmarks/throughput.py --n 2000 --concurrency 50 --latency-ms 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.testing.fake_provider import FakeProvider  # noqa: E402


def _messages(i: int, tag: str) -> list[dict]:
    return [{"role": "user", "content": f"{tag} request {i}: give one tip."}]


def _client_bench(url: str, conc: int, cache_dir: str):
    """Return (send(i), close()) for bench.models.client: cap, retries, cache (on, in a temp dir), usage, cost."""
    from bench.models.client import LLM, Limits
    from bench.models.routing import ModelSpec

    llm = LLM(Limits(max_concurrency=conc, timeout_s=30), cache=os.path.join(cache_dir, "bench.sqlite"))
    spec = ModelSpec("openai/fake-model", api_base=url, params={"max_tokens": 16})

    async def send(i: int) -> None:
        assert (await llm.complete(spec, _messages(i, "bench"))).text

    return send, llm.aclose


def _client_litellm(url: str, conc: int, cache_dir: str):
    """Return (send(i), close()) for plain litellm.acompletion behind one semaphore."""
    from bench.models._litellm import litellm

    lm = litellm()
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


def measure(factory, url: str, n: int, conc: int, cache_dir: str) -> tuple[float, float]:
    """Return (requests/s, client CPU ms per request) in steady state.

    Each client warms up (imports, connections, first-call costs) with 2×concurrency
    requests in the same event loop, then sends the n timed requests; all three
    clients are measured the same way.
    """
    async def run() -> tuple[float, float]:
        send, close = factory(url, conc, cache_dir)
        await asyncio.gather(*(send(-1 - i) for i in range(2 * conc)))
        wall0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(send(i) for i in range(n)))
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        await close()
        return n / wall, 1000 * cpu / n

    os.makedirs(cache_dir, exist_ok=True)
    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds per client; medians are reported (shared machines are noisy)")
    args = ap.parse_args()
    limit = args.concurrency / (args.latency_ms / 1000)
    clients = {"bench": _client_bench, "litellm": _client_litellm, "aiohttp": _client_aiohttp}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    with FakeProvider(latency_ms=args.latency_ms) as fake, tempfile.TemporaryDirectory() as tmp:
        print(f"n={args.n} concurrency={args.concurrency} latency={args.latency_ms:g} ms "
              f"limit={limit:.0f} req/s, {args.rounds} interleaved rounds (fake provider in its own process)")
        for r in range(args.rounds):
            for name, factory in clients.items():
                rps, cpu_ms = measure(factory, fake.url, args.n, args.concurrency, os.path.join(tmp, f"{name}{r}"))
                runs[name].append((rps, cpu_ms))
                print(f"  round {r + 1} {name:8s} {rps:8.1f} req/s  {rps / limit:5.2f} of limit  "
                      f"{cpu_ms:6.2f} ms CPU/request")
    med = {name: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for name, v in runs.items()}
    print("medians:")
    for name, (rps, cpu_ms) in med.items():
        print(f"  {name:8s} {rps:8.1f} req/s  {rps / limit:5.2f} of limit  {cpu_ms:6.2f} ms CPU/request")
    print(json.dumps({"limit_rps": round(limit, 1),
                      **{f"{k}_rps": round(v[0], 1) for k, v in med.items()},
                      **{f"{k}_cpu_ms": round(v[1], 3) for k, v in med.items()}}))


if __name__ == "__main__":
    main()
