"""Dollars per 1,000 graded items, per judging mode, with the prompt laid out for a provider's prompt cache (the fixed
part first, as bench builds it) and with the item first (``bench.judge.layout.ITEM_FIRST``, set only here).

The fake provider caches prompt prefixes as OpenAI does (``prefix_cache``: from 1,024 tokens, in 128-token blocks) and
bills them at ``cached_input``; the judge is priced as gpt-4o (USD 2.50 input, 1.25 cached input, 10.00 output per
million tokens) and its tokens counted with o200k. The rubrics are the shipped ``tip-v1`` and ``arena-pairwise``
with worked examples appended (about 2,600 tokens of fixed part, as a rubric with few-shot examples runs). Each
mode grades the same items both ways; the fake reads a prompt's content in any order alike (``layout_blind``), so the
verdicts must be identical. Last line: JSON with each way's dollars per 1,000 items and its ratio to single-item
judging with the item first.

    python benchmarks/judge_cost.py [--items 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
from pathlib import Path

from bench.config.entries import JudgeEntry
from bench.config.rubrics import load_rubric
from bench.core.records import Scenario
from bench.judge import layout
from bench.judge.grader import Item, Judge, grade_items
from bench.models.client import LLM, Limits
from bench.models.routing import resolve
from bench.models.tokens import counter_for
from bench.testing.fake_provider import FakeProvider
from bench.testing.fake_provider.quality import answer_text

ROOT = Path(__file__).resolve().parents[1]
PRICE = {"input_per_mtok": 2.5, "output_per_mtok": 10.0, "cached_input_per_mtok": 1.25}
BILL = {"input": 2.5, "output": 10.0, "cached_input": 1.25}
MODES = (("single", "tip-v1", 0), ("packed k=5", "tip-v1", 5), ("packed k=10", "tip-v1", 10),
         ("pairwise", "arena-pairwise", 0))
WORDS = ("the report deadline moves to Friday so plan the outline tonight and draft two sections tomorrow morning "
         "while the kids are at school then review the budget table").split()


def with_examples(source: str, folder: Path, examples: int = 10) -> Path:
    """Write the shipped rubric ``source`` with ``examples`` worked examples appended to its instructions."""
    text = (ROOT / "rubrics" / f"{source}.md").read_text()
    rng = random.Random(source)
    shots = [f"<example-{n}>\nScenario: persona {n}, evening slot.\nAnswer: " + " ".join(rng.choices(WORDS, k=90))
             + f"\nHow it was graded: it fits the slot and names the task; a {1 + n % 5} on every criterion, because "
               f"the tip is {'concrete' if n % 2 else 'generic'}.\n</example-{n}>" for n in range(examples)]
    path = folder / f"{source}-shots.md"
    path.write_text(text.replace(f"id: {source}", f"id: {source}-shots", 1).rstrip() + "\n\n## Worked examples\n\n"
                    + "\n\n".join(shots) + "\n")
    return path


def items(n: int, pairs: bool) -> list[Item]:
    """Return ``n`` items: a persona's question and one answer (two, of two models, for pairwise) of ~150 tokens."""
    out = []
    for i in range(n):
        rng = random.Random(i)
        question = f"Persona {i}: a parent with {i % 4 + 1} tasks left tonight. " + " ".join(rng.choices(WORDS, k=40))
        texts = tuple(answer_text(m, str(i)) + ". " + " ".join(rng.choices(WORDS, k=120))
                      for m in (("m1", "m2") if pairs else (("m1", "m2")[i % 2],)))
        out.append(Item(Scenario(fields={"i": i}), question, texts, tuple(f"c{i}-{t}" for t in range(len(texts)))))
    return out


def run(fake: FakeProvider, rubric: Path, k: int, item_first: bool, graded: list[Item]) -> dict:
    """Grade ``graded`` with one judge and layout; return its spend, the bill and its verdicts by judgment id."""
    fake.reset()  # counters, bill and the prefix cache
    fake.configure(prefix_cache=True, tokenizer="o200k", bill_per_mtok=BILL, layout_blind=True)
    layout.ITEM_FIRST = item_first
    entry = JudgeEntry(id="judge", model="openai/gpt-4o", api_base=fake.url, rubric=str(rubric), pack_size=k,
                       price=PRICE)
    judge, out = Judge(entry, load_rubric(str(rubric), ROOT)), []
    llm = LLM(Limits(max_concurrency=8, retries=2, backoff_s=0.01, timeout_s=60))

    async def go() -> None:
        await grade_items(judge, graded, llm, out.append, seed=1)
        await llm.aclose()

    try:
        asyncio.run(go())
    finally:
        layout.ITEM_FIRST = False
    usages = [j.usage for j in out if j.usage is not None]
    prompt = sum(u.prompt_tokens or 0 for u in usages)
    return {"usd": sum(u.cost_usd or 0.0 for u in usages), "billed": fake.stats()["billed"]["usd"],
            "cached_share": sum(u.cached_tokens or 0 for u in usages) / prompt if prompt else 0.0,
            "failed": sum(not j.ok for j in out),
            "verdicts": {j.id: (j.verdict, j.scores) for j in out}, "requests": fake.stats()["requests"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=200)
    a = ap.parse_args()
    rows, identical = {}, True
    with FakeProvider() as fake, tempfile.TemporaryDirectory() as tmp:
        print(f"{a.items} items per mode; judge openai/gpt-4o at $2.50 in / $1.25 cached / $10.00 out per Mtok")
        rubrics = {source: with_examples(source, Path(tmp)) for source in ("tip-v1", "arena-pairwise")}
        for source, path in rubrics.items():
            judge = Judge(JudgeEntry(id="judge", model="openai/gpt-4o", rubric=str(path)), load_rubric(str(path), ROOT))
            fixed = counter_for(resolve(judge.entry.spec())).text(layout.judge_messages(judge, "")[0]["content"])
            print(f"{source} with worked examples: a fixed part of {fixed:,} tokens")
        print(f"{'mode':<12} {'layout':<11} {'$/1000 items':>12} {'cached':>7} {'requests':>8} {'rec/billed':>10}")
        for name, source, k in MODES:
            rubric = rubrics[source]
            graded = items(a.items, source == "arena-pairwise")
            ways = {}
            for way, first in (("cache", False), ("item-first", True)):
                row = ways[way] = run(fake, rubric, k, first, graded)
                rows[f"{name}, {way}"] = row
                print(f"{name:<12} {way:<11} {row['usd'] / a.items * 1000:>12.4f} {row['cached_share']:>7.1%} "
                      f"{row['requests']:>8} {row['usd'] / row['billed']:>10.4f}")
            identical &= ways["cache"]["verdicts"] == ways["item-first"]["verdicts"] and not any(
                w["failed"] for w in ways.values())
    per_1000 = {key: round(row["usd"] / a.items * 1000, 4) for key, row in rows.items()}
    naive = per_1000["single, item-first"]
    cheapest = min(per_1000, key=per_1000.__getitem__)
    print(f"cheapest: {cheapest}, {per_1000[cheapest] / naive:.3f} x single-item item-first (goal <= 0.4); "
          f"verdicts identical across layouts: {identical}")
    print(json.dumps({"usd_per_1000_items": per_1000, "ratio_to_naive": {k: round(v / naive, 3)
                                                                        for k, v in per_1000.items()},
                      "cached_share": {k: round(r["cached_share"], 3) for k, r in rows.items()},
                      "recorded_over_billed": {k: round(r["usd"] / r["billed"], 4) for k, r in rows.items()},
                      "cheapest": cheapest, "cheapest_ratio": round(per_1000[cheapest] / naive, 3),
                      "verdicts_identical": identical}))


if __name__ == "__main__":
    main()
