"""The full leaderboard with bootstrap CIs on 1,000,000 synthetic judgment rows: bench.analysis
(polars + one matrix product per block of resamples) against a straightforward pandas version
of the same computation, side by side in one run.

The data: 20 cells × 5 criteria × 10,000 scenarios = 1,000,000 long-format score rows (integer
1–5 grades around a per-cell level), generated here with a fixed seed. Both versions average
samples per scenario, then draw 1000 resamples of the scenarios (the same draws for every
column: a paired bootstrap) and take the 2.5/97.5 percentiles of each (cell, criterion) mean;
they use the same random stream, so their intervals must agree to rounding, and the benchmark
checks that they do. Each version runs in its own fresh process so its peak memory (max RSS
above the process's RSS once the data is built) is its own. Target: under 10 s and ≥ 5× pandas.

    python benchmarks/analysis.py [--rows 1000000] [--resamples 1000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import time

CELLS, CRITERIA = 20, 5


def synthetic(rows: int, seed: int = 0):
    """Return a polars long score table: CELLS cells × CRITERIA criteria × rows/(CELLS·CRITERIA) scenarios."""
    import numpy as np  # noqa: PLC0415
    import polars as pl  # noqa: PLC0415

    scenarios = rows // (CELLS * CRITERIA)
    rng = np.random.default_rng(seed)
    cell = np.repeat(np.arange(CELLS), CRITERIA * scenarios)
    crit = np.tile(np.repeat(np.arange(CRITERIA), scenarios), CELLS)
    scen = np.tile(np.arange(scenarios), CELLS * CRITERIA)
    level = 2.0 + 2.0 * cell / (CELLS - 1) + 0.2 * crit
    value = np.clip(np.rint(level + rng.normal(0, 1.0, cell.size)), 1, 5)
    models, prompts = [f"model-{c // 2:02d}" for c in range(CELLS)], [f"tip@v{c % 2 + 1}" for c in range(CELLS)]
    return pl.DataFrame({
        "judge": pl.Series(["judge"] * cell.size, dtype=pl.Categorical).cast(pl.Utf8),
        "cell": pl.Series([f"{m}/{p}" for m, p in zip(models, prompts)])[cell],
        "model": pl.Series(models)[cell], "prompt": pl.Series(prompts)[cell],
        "criterion": pl.Series([f"crit{k}" for k in range(CRITERIA)])[crit],
        "scenario": pl.Series([f"s{k:05d}" for k in range(scenarios)])[scen], "value": value})


def bench_leaderboard(frame, resamples: int, seed: int):
    from bench.analysis import leaderboard  # noqa: PLC0415 (imported before the clock starts, in _child)

    return leaderboard(frame, resamples=resamples, seed=seed)


def pandas_leaderboard(df, resamples: int, seed: int):
    """The same leaderboard written plainly in pandas: per-scenario means, a wide table, a loop of resamples."""
    import numpy as np  # noqa: PLC0415

    per = df.groupby(["judge", "cell", "criterion", "scenario"], as_index=False)["value"].mean()
    out = []
    for judge, part in per.groupby("judge"):
        wide = part.pivot_table(index="scenario", columns=["cell", "criterion"], values="value")
        rng = np.random.default_rng(seed)
        boots = []
        for _ in range(resamples):
            idx = rng.integers(0, len(wide), size=len(wide))
            boots.append(wide.iloc[idx].mean())
        boots = np.vstack(boots)
        lo, hi = np.nanquantile(boots, [0.025, 0.975], axis=0)
        stats = wide.mean().rename("mean").reset_index()
        stats["ci_low"], stats["ci_high"], stats["judge"] = lo, hi, judge
        stats["n"] = wide.count().to_numpy()
        out.append(stats)
    import pandas as pd  # noqa: PLC0415

    return pd.concat(out).sort_values(["judge", "criterion", "mean"], ascending=[True, True, False])


def _child(kind: str, rows: int, resamples: int, conn) -> None:
    import bench.analysis  # noqa: F401, PLC0415 (imports are not part of either timing)

    frame = synthetic(rows)
    data = frame.to_pandas() if kind == "pandas" else frame
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    result = (pandas_leaderboard if kind == "pandas" else bench_leaderboard)(data, resamples, seed=0)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if kind == "pandas":
        result = result[["cell", "criterion", "mean", "ci_low", "ci_high"]].to_dict("list")
    else:
        result = result.select("cell", "criterion", "mean", "ci_low", "ci_high").to_dict(as_series=False)
    conn.send({"seconds": seconds, "peak_mb": (peak - base) / 1024, "rows": frame.height, "result": result})


def measure(kind: str, rows: int, resamples: int) -> dict:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_child, args=(kind, rows, resamples, child))
    p.start()
    out = parent.recv()
    p.join()
    return out


def agreement(a: dict, b: dict) -> float:
    """Return the largest |difference| of mean and CI bounds between two results, matched by (cell, criterion)."""
    key = lambda r: {(c, k): (m, lo, hi) for c, k, m, lo, hi in zip(r["cell"], r["criterion"], r["mean"],  # noqa: E731
                                                                   r["ci_low"], r["ci_high"])}
    ka, kb = key(a), key(b)
    return max(abs(x - y) for k in ka for x, y in zip(ka[k], kb[k]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1, help="alternate bench/pandas this many times; medians")
    a = ap.parse_args()
    runs: dict[str, list[dict]] = {"bench": [], "pandas": []}
    for r in range(a.rounds):
        for kind in ("bench", "pandas") if r % 2 == 0 else ("pandas", "bench"):
            runs[kind].append(measure(kind, a.rows, a.resamples))
            m = runs[kind][-1]
            print(f"round {r + 1} {kind:>6}: {m['seconds']:7.2f} s, peak +{m['peak_mb']:.0f} MB "
                  f"({m['rows']:,} rows, {a.resamples} resamples)", flush=True)
    med = {k: sorted(x["seconds"] for x in v)[len(v) // 2] for k, v in runs.items()}
    peak = {k: max(x["peak_mb"] for x in v) for k, v in runs.items()}
    diff = agreement(runs["bench"][0]["result"], runs["pandas"][0]["result"])
    print(f"bench.analysis {med['bench']:.2f} s vs pandas {med['pandas']:.2f} s: {med['pandas'] / med['bench']:.1f}x "
          f"faster; peak memory {peak['bench']:.0f} MB vs {peak['pandas']:.0f} MB; largest difference between "
          f"their means and CI bounds {diff:.2e}")
    print(json.dumps({"rows": runs["bench"][0]["rows"], "resamples": a.resamples, "bench_s": round(med["bench"], 3),
                      "pandas_s": round(med["pandas"], 3), "speedup": round(med["pandas"] / med["bench"], 2),
                      "bench_peak_mb": round(peak["bench"]), "pandas_peak_mb": round(peak["pandas"]),
                      "max_abs_diff": diff}))


if __name__ == "__main__":
    main()
