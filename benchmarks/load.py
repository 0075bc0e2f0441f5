"""A 10,000-item collect + judge run against the fake provider: the cap holds and memory stays bounded.

Each size runs in its own fresh process (pipelined collect + judge through bench.stage_runs, the path
`bench sweep` takes, with the response cache and the store on disk): N candidates from one
model, each graded by one rubric judge, so 2N model calls. Prints, per size, the wall time,
requests/s, the fake provider's peak concurrent requests against the cap, and the process's
peak RSS; then the growth of peak RSS from the smallest to the largest size.

    python benchmarks/load.py [--sizes 1000 10000] [--cap 64] [--latency-ms 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import resource
import tempfile
import time
from pathlib import Path

from bench.testing.grids import grid, judge, model, prompt


def _child(url: str, n: int, cap: int, conn) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-load-"))
    os.environ["BENCH_RUNS"] = str(folder / "runs")
    from bench.core.records import Candidate, Judgment  # noqa: PLC0415
    from bench.run import open_run  # noqa: PLC0415
    from bench.stage_runs import run_collect  # noqa: PLC0415
    from bench.core.store import RunStore  # noqa: PLC0415

    side = int(n ** 0.5) + 1
    grid(folder / "load.yaml", url, name="load", seed=None,
         models=[model("m", url, name="fake-a", params={"max_tokens": 16})], prompts=[prompt("p", "Tip {a}-{b}.")],
         scenarios={"generate": {"dimensions": {"a": list(range(side)), "b": list(range(side))}, "n": n}},
         judges=[judge("grader", url, name="judge")], limits={"max_concurrency": cap, "timeout_s": 30, "retries": 2})
    run = open_run(folder / "load.yaml")
    t0 = time.monotonic()
    asyncio.run(run_collect(run, judge=True, progress="none"))
    wall = time.monotonic() - t0
    store = RunStore(run.dir)
    done = (len(store.done_ids(Candidate)), len(store.done_ids(Judgment)))
    conn.send({"n": n, "wall_s": wall, "done": done, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def measure(url: str, n: int, cap: int) -> dict:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_child, args=(url, n, cap, child))
    p.start()
    while not parent.poll(1.0):
        if not p.is_alive():
            raise SystemExit(f"the {n}-item run died (exit code {p.exitcode}) before reporting")
    out = parent.recv()
    p.join()
    return out


def main() -> None:
    from bench.testing.fake_provider import FakeProvider  # noqa: PLC0415

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--cap", type=int, default=64)
    ap.add_argument("--latency-ms", type=float, default=5)
    a = ap.parse_args()
    rows = []
    with FakeProvider(latency_ms=a.latency_ms) as fake:
        for n in a.sizes:
            fake.reset()
            m = measure(fake.url, n, a.cap)
            stats = fake.stats()
            m.update(requests=stats["requests"], peak_in_flight=stats["peak_in_flight"], cap=a.cap)
            rows.append(m)
            print(f"{n:>6} items: {m['done'][0]} answers + {m['done'][1]} judgments in {m['wall_s']:.1f} s "
                  f"({stats['requests'] / m['wall_s']:.0f} requests/s), peak in flight {stats['peak_in_flight']} "
                  f"(cap {a.cap}), peak RSS {m['peak_rss_mb']:.0f} MB", flush=True)
    first, last = rows[0], rows[-1]
    growth = last["peak_rss_mb"] - first["peak_rss_mb"]
    print(f"peak RSS grew {growth:.0f} MB ({last['peak_rss_mb'] / first['peak_rss_mb']:.2f}x) from {first['n']} to "
          f"{last['n']} items ({last['n'] / first['n']:.0f}x the work)")
    print(json.dumps({"sizes": [r["n"] for r in rows], "peak_rss_mb": [round(r["peak_rss_mb"]) for r in rows],
                      "wall_s": [round(r["wall_s"], 1) for r in rows], "peak_in_flight": [r["peak_in_flight"] for r in rows],
                      "cap": a.cap, "all_done": all(r["done"] == (r["n"], r["n"]) for r in rows)}))


if __name__ == "__main__":
    main()
