"""`compare_runs` on two run folders of 100,000 judgments each: how long the comparison takes.

The data: two synthetic run folders written with the run store (records from ``bench.testing.records``),
each 5 cells × 10,000 scenarios answered once and graded by 2 judges on 2 criteria (100,000 judgments,
300,000 score rows with the composite); in run B one cell has a new prompt version (paired with ``mapping``)
and grades half a point higher, the others are regraded with noise. Three figures, medians over ``--rounds``:

- ``compare_s``: ``compare_runs`` on the two runs' tables (matching, per-scenario means, 2,000 bootstrap
  resamples of the scenarios for all 30 rows, the tests and Holm): the comparison itself;
- ``load_s``: reading both folders with ``bench.analysis.load_run``, the one record reader every analysis
  shares (records read by polars against their declared schema, bench.analysis.record_reader; set-aside and
  review checks);
- ``end_to_end_s``: ``compare_runs`` given the two folders (both together; target < 5 s).

Each is also given as CPU seconds of this process (``*_cpu_s``: polars' threads included), steadier than wall
time on a machine other jobs share.

    .venv/bin/python benchmarks/compare.py [--scenarios 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.analysis import compare_runs, load_run
from bench.core.store import RunStore
from bench.testing.records import candidate, judgment, scenario

CELLS, JUDGES, TARGET_S = 5, 2, 5.0
MAPPING = {"m0/p@v1": "m0/p@v2"}


def write_run(root: Path, scenarios: int, better: float, seed: int) -> int:
    """Write a run folder; return its number of judgments. Cell m0 uses prompt v2 in run B (``better`` > 0)."""
    rng = random.Random(seed)
    scens = [scenario({"topic": f"t{i}"}) for i in range(scenarios)]
    records: list = list(scens)
    judged = 0
    for m in range(CELLS):
        version = "v2" if m == 0 and better else "v1"
        for s in scens:
            c = candidate(s, model_id=f"m{m}", prompt_version=version, output=f"answer {m} {s.id} {version}")
            records.append(c)
            level = 2.5 + 0.3 * m + (better if m == 0 else 0.0)
            for j in range(JUDGES):
                q = min(5.0, max(1.0, round(level + rng.gauss(0, 1))))
                c2 = min(5.0, max(1.0, round(level + rng.gauss(0, 1))))
                records.append(judgment(c, judge_id=f"j{j}", score=(q + c2) / 2, scores={"quality": q, "clarity": c2},
                                        rationale="graded"))
                judged += 1
    RunStore(root).append(records)
    return judged


def timed(call, wall: list[float], cpu: list[float]):
    """Return ``call()``, appending its wall and CPU seconds to ``wall`` and ``cpu``."""
    w, c = time.perf_counter(), time.process_time()
    out = call()
    wall.append(time.perf_counter() - w)
    cpu.append(time.process_time() - c)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=10_000, help="scenarios per run (judgments = × 10)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    names = ["compare", "load", "end_to_end"]
    wall: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    try:
        t0 = time.perf_counter()
        n = [write_run(tmp / name, args.scenarios, better, seed) for name, better, seed in (("a", 0.0, 1), ("b", 0.5, 2))]
        print(f"wrote two runs of {n[0]:,} and {n[1]:,} judgments in {time.perf_counter() - t0:.1f} s", flush=True)
        for r in range(args.rounds):
            a, b = timed(lambda: (load_run(tmp / "a"), load_run(tmp / "b")), wall["load"], cpu["load"])
            cmp = timed(lambda: compare_runs(a, b, mapping=MAPPING, n_boot=2000), wall["compare"], cpu["compare"])
            del a, b
            timed(lambda: compare_runs(tmp / "a", tmp / "b", mapping=MAPPING, n_boot=2000), wall["end_to_end"],
                  cpu["end_to_end"])
            better = cmp.rows.filter(cmp.rows["significant"] & (cmp.rows["diff"] > 0)).height
            print(f"round {r + 1}: " + ", ".join(f"{k} {wall[k][-1]:.2f} s (cpu {cpu[k][-1]:.2f} s)" for k in names)
                  + f" ({cmp.rows.height} rows, {better} significantly better)", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {f"{k}_s": round(statistics.median(wall[k]), 3) for k in names}
    med |= {f"{k}_cpu_s": round(statistics.median(cpu[k]), 3) for k in names}
    ok = med["end_to_end_s"] < TARGET_S
    print(f"compare_runs end to end: {med['end_to_end_s']} s (target < {TARGET_S} s): {'ok' if ok else 'OVER'}; "
          f"on the tables {med['compare_s']} s; reading both folders {med['load_s']} s")
    print(json.dumps({"judgments_per_run": n[0], "rows": cmp.rows.height, **med, "target_s": TARGET_S,
                      "rounds": args.rounds, "ok": ok}))


if __name__ == "__main__":
    main()
