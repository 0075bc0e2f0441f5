"""Model calls per judged item in the packed mode, clean and with corrupted packed items.

500 items are graded on the shipped `tip-v1` rubric by a judge on the fake provider with
pack_size 1, 5 and 10. "Corrupted" runs have the fake put 10% of the items of every
packed reply off the scale; only those items are re-graded singly. Target: calls per item
<= 1/k + the corrupted fraction. Every judgment must end valid either way.

    python benchmarks/packing.py --items 500 --corrupt 0.1
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from bench.judge.grader import Item, Judge, grade_items  # noqa: E402
from bench.models.client import LLM, Limits  # noqa: E402
from bench.config.entries import JudgeEntry  # noqa: E402
from bench.core.records import Scenario  # noqa: E402
from bench.config.rubrics import load_rubric  # noqa: E402
from bench.testing.fake_provider import FakeProvider  # noqa: E402


def items(n: int) -> list[Item]:
    return [Item(Scenario(fields={"i": i}), f"Persona {i % 7}, slot {i % 3}: one tip.",
                 (f"Tip {i}: take a short walk, then answer the two oldest emails.",), (f"c{i}",)) for i in range(n)]


def run(fake: FakeProvider, k: int, corrupt: float, n: int) -> dict:
    """Grade n items with pack size k; return calls per item and the validity of every judgment."""
    fake.reset()
    fake.configure(corrupt_items=corrupt)
    entry = JudgeEntry(id=f"judge-k{k}", model="openai/judge", api_base=fake.url, rubric="tip-v1", pack_size=k)
    judge = Judge(entry, load_rubric("tip-v1", ROOT))
    out = []
    llm = LLM(Limits(max_concurrency=16, retries=2, backoff_s=0.01, timeout_s=30))

    async def go() -> None:
        await grade_items(judge, items(n), llm, out.append, seed=1)
        await llm.aclose()

    asyncio.run(go())
    calls = fake.stats()["requests"]
    fallbacks = sum(j.details.get("fallback") == "single" for j in out)
    return {"k": k, "corrupt": corrupt, "judged": len(out), "valid": sum(j.ok for j in out), "calls": calls,
            "calls_per_item": calls / n, "fallbacks": fallbacks, "target": 1 / k + corrupt}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--corrupt", type=float, default=0.1)
    a = ap.parse_args()
    rows = []
    with FakeProvider(latency_ms=5) as fake:
        print(f"{a.items} items, rubric tip-v1; target: calls/item <= 1/k + corrupted fraction")
        for corrupt in (0.0, a.corrupt):
            for k in (1, 5, 10):
                r = run(fake, k, corrupt, a.items)
                rows.append(r)
                ok = "meets" if r["calls_per_item"] <= r["target"] + 1e-9 else "MISSES"
                print(f"  k={k:2d} corrupted={corrupt:.0%}: {r['calls']:4d} calls = {r['calls_per_item']:.3f}/item "
                      f"(target {r['target']:.3f}: {ok}); {r['fallbacks']} re-graded singly; "
                      f"{r['valid']}/{r['judged']} judgments valid")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
