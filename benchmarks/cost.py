"""What a grid costs directly and through the Batch API, and how close `bench estimate` came, in one run.

A 1 model × 2 prompts × N scenarios grid (default N = 200) with a rubric judge, every entry priced
(USD per million tokens: model 1.00 in / 2.00 out, judge 2.50 in / 10.00 out; answers capped at
64 tokens), against the fake provider counting tokens like OpenAI (tiktoken cl100k). The same grid
runs twice by `bench sweep`, each into its own folder and response cache: directly, and with
``batch:`` on the model and the judge (polled every 0.2 s). Each way first runs a pilot of the first
10% of the scenarios (as a researcher would), then `bench estimate --json` predicts the rest and
the full sweep runs it. For each way it prints, for the sweep after the pilot:

  requests   what reached the provider (direct chat requests + batch lines)
  tokens     prompt and completion tokens over the run's records
  cost       USD over the records (the batch way at the batch price)
  wall       the whole `bench sweep` command
  estimate   requests, input tokens and expected cost predicted beforehand, and the ratio actual/estimate

    python benchmarks/cost.py [--scenarios 200] [--latency-ms 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.fake_provider import FakeProvider
from bench.testing.grids import bench, generate, grid, judge, model, prompt, sweep

MODEL_PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
JUDGE_PRICE = {"input_per_mtok": 2.5, "output_per_mtok": 10.0}
BATCH = {"poll_s": 0.2, "poll_max_s": 1.0, "gather_s": 0.3}


def write_grid(path: Path, url: str, scenarios: int, batch: bool) -> Path:
    extra = {"batch": BATCH} if batch else {}
    return grid(path, url, name="cost", models=[model("m1", url, price=MODEL_PRICE, params={"max_tokens": 64}, **extra)],
                prompts=[prompt("tip", "Give one practical tip about {topic}, in two sentences."),
                         prompt("warn", "Name one common mistake about {topic}, in one sentence.")],
                scenarios=generate(topic=[f"topic number {i}" for i in range(scenarios)]),
                judges=[judge("grader", url, price=JUDGE_PRICE, **extra)],
                limits={"max_concurrency": 32, "timeout_s": 30, "retries": 2})


def totals(run_dir: Path) -> dict:
    out = {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "records": 0}
    store = RunStore(run_dir)
    for kind in (Candidate, Judgment):
        for rec in store.latest(kind).values():
            if rec.usage is not None and not rec.usage.cached:
                out["records"] += 1
                out["prompt_tokens"] += rec.usage.prompt_tokens or 0
                out["completion_tokens"] += rec.usage.completion_tokens or 0
                out["cost_usd"] += rec.usage.cost_usd or 0.0
    return out


def run_way(fake: FakeProvider, tmp: Path, scenarios: int, batch: bool) -> dict:
    where = tmp / ("batch" if batch else "direct")
    where.mkdir()
    fake.reset()  # counters and config back to the defaults: then count tokens like OpenAI
    fake.configure(tokenizer="cl100k")
    pilot = sweep(where, write_grid(where / "cost.yaml", fake.url, max(1, scenarios // 10), batch), timeout=None)
    if pilot.returncode != 0:
        raise SystemExit(f"the pilot sweep failed:\n{pilot.stdout[-3000:]}{pilot.stderr[-3000:]}")
    before = totals(where / "runs" / "cost")
    params = write_grid(where / "cost.yaml", fake.url, scenarios, batch)
    est = bench(where, "estimate", str(params), "--json", timeout=None)
    if est.returncode != 0:
        raise SystemExit(f"bench estimate failed:\n{est.stdout}{est.stderr}")
    estimate = json.loads(est.stdout)["total"]
    fake.reset()
    fake.configure(tokenizer="cl100k")
    t0 = time.perf_counter()
    done = sweep(where, params, timeout=None)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"bench sweep failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    stats = fake.stats()
    after = totals(where / "runs" / "cost")
    lines = stats.get("batches", {}).get("lines_answered", 0)  # failed lines included
    return {"way": "batch" if batch else "direct", "requests": stats["requests"] + lines, "wall_s": wall,
            "batches": stats.get("batches", {}).get("created", 0),
            **{k: after[k] - before[k] for k in after}, "estimate": estimate}


def show(row: dict) -> None:
    est = row["estimate"]
    sent = (est.get("requests") or 0) - (est.get("cached") or 0)
    print(f"{row['way']:>6}  requests {row['requests']:6d} (batches {row['batches']})  "
          f"tokens {row['prompt_tokens']:8d} in {row['completion_tokens']:7d} out  "
          f"cost ${row['cost_usd']:.4f}  wall {row['wall_s']:6.1f} s")
    ratio = lambda a, b: f"{a / b:.3f}" if b else "n/a"  # noqa: E731
    exp = est.get("cost_usd_expected")
    print(f"        estimate: requests {sent} (actual/estimate {ratio(row['requests'], sent)}), input tokens "
          f"{est.get('input_tokens')} ({ratio(row['prompt_tokens'], est.get('input_tokens') or 0)}), "
          f"expected cost ${exp if exp is None else round(exp, 4)} "
          f"({ratio(row['cost_usd'], exp or 0)}), max ${est.get('cost_usd_max')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=200)
    ap.add_argument("--latency-ms", type=float, default=20)
    a = ap.parse_args()
    with FakeProvider(latency_ms=a.latency_ms, tokenizer="cl100k") as fake, tempfile.TemporaryDirectory() as tmp:
        rows = [run_way(fake, Path(tmp), a.scenarios, batch) for batch in (False, True)]
    print(f"grid: 1 model × 2 prompts × {a.scenarios} scenarios + a rubric judge (after a pilot of "
          f"{max(1, a.scenarios // 10)}); fake latency {a.latency_ms:g} ms")
    for row in rows:
        show(row)
    direct, batched = rows
    if direct["cost_usd"]:
        print(f"batch/direct: cost {batched['cost_usd'] / direct['cost_usd']:.3f}, "
              f"wall {batched['wall_s'] / direct['wall_s']:.2f}")


if __name__ == "__main__":
    main()
