"""Sweep throughput and papermill overhead against the fake provider, side by side in one run.

A 2 models × 3 prompts × N scenarios grid (default N = 1000: 6000 requests) at a fixed
latency and cap, run by `bench sweep` three ways: --jobs 1, --jobs 3 and --per-cell.
The fake provider's request counter is polled every 50 ms; for each way it prints:
  wall       the whole `bench sweep` command, start to exit
  overhead   start to the first request reaching the provider (the target: <= 5 s)
  fixed      the whole fixed cost per execution, tail included: (wall - requests / steady rate) / waves
  steady     requests/s while requests flow, and its ratio to the limit (cap / latency)

    python benchmarks/sweep.py --scenarios 1000 --cap 48 --latency-ms 100
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.testing.fake_provider import FakeProvider
from bench.testing.grids import generate, grid, model, prompt

ROOT = Path(__file__).resolve().parents[1]


def write_grid(path: Path, url: str, cap: int, scenarios: int) -> Path:
    """Two models × three prompts × ``scenarios`` generated scenarios."""
    return grid(path, url, name="sweepbench",
                models=[model("m1", url, name="fake-a", params={"max_tokens": 16}),
                        model("m2", url, name="fake-b", params={"max_tokens": 16})],
                prompts=[prompt("p1", "Task {i}: one tip."), prompt("p2", "Scenario {i}: answer briefly."),
                         prompt("p3", "Item {i}?", system="Be concise.")],
                scenarios=generate(i=list(range(scenarios))),
                limits={"max_concurrency": cap, "timeout_s": 30, "retries": 4})


def run_way(fake: FakeProvider, params: Path, runs: Path, args: list[str], total: int) -> dict:
    """Run one `bench sweep` and return its wall time, first-request time and steady rate."""
    fake.reset()
    fake.configure(latency_ms=fake.latency_ms)
    env = {**os.environ, "BENCH_RUNS": str(runs)}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "bench", "sweep", str(params), *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    series = [(0.0, 0)]
    while proc.poll() is None:
        time.sleep(0.05)
        series.append((time.monotonic() - t0, fake.stats()["requests"]))
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"sweep {args} failed:\n{proc.stderr.read()[-2000:]}")
    first = next((t for t, n in series if n > 0), wall)
    active = sum(t1 - t0_ for (t0_, n0), (t1, n1) in zip(series, series[1:]) if n1 > n0)
    steady = series[-1][1] / active if active else 0.0
    return {"wall": wall, "first": first, "steady": steady, "requests": fake.stats()["requests"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=1000)
    ap.add_argument("--cap", type=int, default=48)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    a = ap.parse_args()
    limit = a.cap / (a.latency_ms / 1000)
    total = 6 * a.scenarios
    ways = {"--jobs 1": (["--jobs", "1"], 1, 1), "--jobs 3": (["--jobs", "3"], 3, 3),
            "--per-cell": (["--per-cell"], 6, 1)}
    results = {}
    with FakeProvider(latency_ms=a.latency_ms) as fake, tempfile.TemporaryDirectory() as tmp:
        print(f"grid 2 models × 3 prompts × {a.scenarios} scenarios = {total} requests; cap {a.cap}, "
              f"latency {a.latency_ms:g} ms, limit {limit:.0f} req/s")
        for name, (args, executions, parallel) in ways.items():
            params = Path(tmp) / f"grid-{name.strip('-').replace(' ', '')}.yaml"
            write_grid(params, fake.url, a.cap, a.scenarios)
            r = run_way(fake, params, Path(tmp) / f"runs-{len(results)}", args, total)
            waves = math.ceil(executions / parallel)
            r["overhead"] = max(0.0, (r["wall"] - total / r["steady"]) / waves) if r["steady"] else float("nan")
            r["ratio"] = r["steady"] / limit
            results[name] = r
            print(f"  {name:10s} wall {r['wall']:6.1f}s  overhead (start→first request) {r['first']:5.2f}s  "
                  f"fixed cost/execution {r['overhead']:5.2f}s ({executions} executions)  "
                  f"steady {r['steady']:6.1f} req/s = {r['ratio']:.2f} of limit  requests {r['requests']}")
    print(json.dumps({k: {m: round(v, 3) for m, v in r.items()} for k, r in results.items()}))


if __name__ == "__main__":
    main()
