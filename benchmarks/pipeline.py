"""Sweep wall time with pipelining (judge as candidates arrive) vs collect-then-judge, on the fake provider.

The realistic setting where pipelining matters: each stage is bound by its own model's
limit (here `max_concurrency` per model: a server's slots, a provider's concurrency
limit), not by the sweep's global cap. Three fresh runs of
`bench sweep`, each with its own run folder and response cache:
  collect alone   the grid without judges
  judge alone     --only-stage judge on the collected run
  pipelined       the grid with its judge, from scratch (collect grades as it goes)
collect-then-judge is the first two back to back. Target: pipelined <= 1.15 × max(collect, judge).

    python benchmarks/pipeline.py --scenarios 200 --slots 4 --judge-slots 8 --latency-ms 200
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.testing import grids
from bench.testing.fake_provider import FakeProvider


def write_grid(path: Path, url: str, slots: int, scenarios: int, judge_slots: int | None = None) -> Path:
    """Two models × two prompts × ``scenarios``, each model capped at ``slots``; a judge when ``judge_slots``."""
    judges = None if judge_slots is None else [grids.judge("grader", url, name="judge", max_concurrency=judge_slots)]
    return grids.grid(
        path, url, name="pipe",
        models=[grids.model("m1", url, name="fake-a", max_concurrency=slots, params={"max_tokens": 32}),
                grids.model("m2", url, name="fake-b", max_concurrency=slots, params={"max_tokens": 32})],
        prompts=[grids.prompt("tip", "Persona {i}: one practical tip."),
                 grids.prompt("tip", "As persona {i}, what is one practical tip?", version="v2")],
        scenarios=grids.generate(i=list(range(scenarios))), judges=judges,
        limits={"max_concurrency": 64, "timeout_s": 30, "retries": 2})


def timed_sweep(params: Path, where: Path, *args: str) -> float:
    """Run `bench sweep` (its report and tracking too) with its runs under ``where``; return its wall time in s."""
    t0 = time.monotonic()
    out = grids.sweep(where, params, *args, report=True, track=True, timeout=None)
    if out.returncode != 0:
        raise SystemExit(f"sweep failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=200)
    ap.add_argument("--slots", type=int, default=4, help="requests in flight per collect model (two models)")
    ap.add_argument("--judge-slots", type=int, default=8, help="requests in flight for the judge model")
    ap.add_argument("--latency-ms", type=float, default=200.0)
    a = ap.parse_args()
    with FakeProvider(latency_ms=a.latency_ms) as fake, tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        plain = write_grid(tmp_path / "plain.yaml", fake.url, a.slots, a.scenarios)
        judged = write_grid(tmp_path / "judged.yaml", fake.url, a.slots, a.scenarios, a.judge_slots)
        n = 4 * a.scenarios
        print(f"{n} candidates (2 models × 2 prompts, {a.slots} slots per model), {n} judgments "
              f"({a.judge_slots} judge slots), latency {a.latency_ms:g} ms, global cap 64")
        collect = timed_sweep(plain, tmp_path / "a")
        judge = timed_sweep(judged, tmp_path / "a", "--only-stage", "judge")
        piped = timed_sweep(judged, tmp_path / "b")
        requests = fake.stats()["requests"]
    longest = max(collect, judge)
    print(f"  collect alone      {collect:6.1f} s")
    print(f"  judge alone        {judge:6.1f} s")
    print(f"  collect then judge {collect + judge:6.1f} s")
    print(f"  pipelined          {piped:6.1f} s = {piped / longest:.2f} × max(collect, judge) "
          f"(target <= 1.15: {'meets' if piped <= 1.15 * longest else 'MISSES'}); "
          f"{piped / (collect + judge):.2f} × collect-then-judge")
    print(json.dumps({"collect_s": round(collect, 2), "judge_s": round(judge, 2), "pipelined_s": round(piped, 2),
                      "ratio_to_max": round(piped / longest, 3), "requests": requests}))


if __name__ == "__main__":
    main()
