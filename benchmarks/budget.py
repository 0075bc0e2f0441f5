"""Does ``limits.budget_usd`` hold against a provider whose bill is not what was asked? Four spend faults.

Each fault runs the collect stage of a priced grid (the notebook's way: ``run_collect``, no pre-start
check) against the loopback fake provider, whose ``billed`` counter is what a provider would charge, with
the sweep's lease server holding the budget as ``bench sweep`` does (``max_concurrency`` 8, so replies
are in flight together):

  over_limit      every reply is 400 tokens for max_tokens 40 (a provider that ignores max_tokens)
  cjk             prompts of 400 CJK characters (891 cl100k tokens; 100 as characters / 4), a model
                  whose tokenizer LiteLLM has (gpt-3.5-turbo: cl100k_base)
  cjk_bytes       the same prompts, a model LiteLLM has no tokenizer for (counted as UTF-8 bytes)
  missing_usage   replies carry no usage; a first run within the budget, then a resume with more items
  paid_failures   the first attempt of every request is an empty finish_reason=length reply billed at
                  its max_tokens, retried

For each it prints billed / budget, what the records say was spent (what a resume reads), and the
in-flight bound: what the budget's purse says replies overran past the margin it had set aside when they
were sent (``Purse.surprise``), over the budget. The guarantee checked: billed / budget <= 1 + that bound
(the bound is 0 when every reply kept to its reservation). The last line is one JSON object.

    python benchmarks/budget.py [--scale 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.core.errors import BudgetReached
from bench.core.spend import recorded_spend
from bench.models.budget import budget_line
from bench.models.ratelimit import LeaseServer
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing.fake_provider import FakeProvider
from bench.testing.grids import grid, model, prompt

PRICE = 1000.0  # USD per million tokens, in and out: $0.001 a token, so the figures are easy to follow
CJK = "".join(chr(0x4E00 + i * 997 % 6000) for i in range(400))
CONCURRENCY = 8

FAULTS: dict[str, dict[str, Any]] = {  # fake provider config, grid, budget, runs (topics per run)
    "over_limit": {"fake": {"over_limit_tokens": 400}, "name": "fake-1", "max_tokens": 40, "budget": 20.0,
                   "runs": [120]},
    "cjk": {"fake": {"tokenizer": "cl100k"}, "name": "gpt-3.5-turbo", "max_tokens": 10, "user": CJK + " {topic}",
            "budget": 20.0, "runs": [60]},
    "cjk_bytes": {"fake": {"tokenizer": "cl100k"}, "name": "m-cjk", "max_tokens": 10, "user": CJK + " {topic}",
                  "budget": 20.0, "runs": [60]},
    "missing_usage": {"fake": {"omit_usage": True, "tokenizer": "cl100k"}, "name": "gpt-3.5-turbo",
                      "max_tokens": 200, "user": "Write about {topic}. " * 40, "budget": 10.0, "runs": [10, 100]},
    "paid_failures": {"fake": {"empty_first": 1, "empty_bills_limit": True}, "name": "fake-1", "max_tokens": 200,
                      "budget": 10.0, "runs": [100], "retries": 2},
}


def write(path: Path, url: str, fault: dict[str, Any], topics: int) -> Path:
    entry = model("m1", url, name=fault["name"], price={"input_per_mtok": PRICE, "output_per_mtok": PRICE},
                  params={"max_tokens": fault["max_tokens"]})
    limits = {"max_concurrency": CONCURRENCY, "timeout_s": 30, "retries": fault.get("retries", 0), "backoff_s": 0.01,
              "budget_usd": fault["budget"]}
    return grid(path, url, name=path.stem, topics=topics, models=[entry],
                prompts=[prompt("p", fault.get("user", "One tip about {topic}."))], limits=limits)


def run_fault(fake: FakeProvider, key: str, fault: dict[str, Any], folder: Path, scale: int) -> dict[str, Any]:
    """Run one fault's collect stage(s) under its budget; return billed, records and the purse's figures."""
    fake.reset()
    fake.configure(bill_per_mtok={"input": PRICE, "output": PRICE}, **fault["fake"])
    stops, state = 0, {}
    for topics in fault["runs"]:
        params = write(folder / f"{key}.yaml", fake.url, fault, topics * scale)
        spent = recorded_spend(open_run(params).dir).usd  # what a resume starts from: the records
        with LeaseServer(budget=(fault["budget"], spent)) as server:  # as `bench sweep` holds a budget
            run = open_run(params, lease_server=server.address, shared_budget=True)  # what a sweep tells a kernel
            try:
                asyncio.run(run_collect(run, progress="none"))
            except BudgetReached:
                stops += 1
            assert server.purse is not None
            state = server.purse.report()
        print(f"  {key} ({topics * scale} items): {budget_line(state)}", flush=True)
    bill = fake.stats()["billed"]
    spend = recorded_spend(folder / "runs" / key)
    budget = fault["budget"]
    return {"billed_usd": round(bill["usd"], 6), "budget_usd": budget, "ratio": round(bill["usd"] / budget, 4),
            "records_usd": round(spend.usd, 6), "records_over_billed": round(spend.usd / bill["usd"], 4),
            "in_flight_bound": round(float(state.get("surprise", 0.0)) / budget, 4), "replies": bill["replies"],
            "stopped": stops, "over_limit": spend.over_limit, "estimated": spend.estimated, "repaid": spend.repaid}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=1, help="multiply every grid's items (default 1)")
    a = ap.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, FakeProvider() as fake:
        os.environ["BENCH_RUNS"] = str(Path(tmp) / "runs")
        for key, fault in FAULTS.items():
            row = results[key] = run_fault(fake, key, fault, Path(tmp), a.scale)
            print(f"{key:>14}: billed ${row['billed_usd']:.4f} of ${row['budget_usd']:.2f} (ratio {row['ratio']:.4f}, "
                  f"in-flight bound {row['in_flight_bound']:.4f}); records ${row['records_usd']:.4f} "
                  f"({row['records_over_billed']:.4f} of billed); over_limit {row['over_limit']}, estimated "
                  f"{row['estimated']}, paid more than once {row['repaid']}", flush=True)
    held = all(r["ratio"] <= 1.0 + r["in_flight_bound"] + 1e-9 for r in results.values())
    print(json.dumps({"faults": {k: {"billed_over_budget": r["ratio"], "in_flight_bound": r["in_flight_bound"],
                                     "records_over_billed": r["records_over_billed"]} for k, r in results.items()},
                      "held": held, "concurrency": CONCURRENCY}))
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
