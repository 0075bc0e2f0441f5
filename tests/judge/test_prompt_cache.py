"""Judging against a provider that caches prompt prefixes (the fake's ``prefix_cache``, as OpenAI's): the rubric comes
first and byte-identical, so most of the judge's input is served from the cache, and the records' spend, with the
cached price, is what the provider billed (issue 51: bench recorded 3.2x the bill before)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from bench.analysis.tables import load_run
from bench.analysis.usage import usage_by_judge
from bench.config.entries import JudgeEntry
from bench.config.rubrics import load_rubric
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.judge import layout
from bench.models._transport import prompt_cache
from bench.models.routing import ModelSpec, cache_prices, cost_usd, resolve
from bench.testing.grids import grid, judge, model
from bench.testing.in_process import command, run_stages

BILL = {"input": 2.5, "output": 10.0, "cached_input": 1.25}
PRICE = {"input_per_mtok": 2.5, "output_per_mtok": 10.0, "cached_input_per_mtok": 1.25}


def long_rubric(path, words: int = 150):
    """A rubric whose instructions run to about 2,000 tokens (long enough to be cached), one criterion 1-5."""
    body = "\n".join(f"Guideline {i}: an answer that names concrete step {i} before step {i + 1} is better than "
                     f"one that does not." for i in range(words))
    path.write_text(f"---\nid: {path.stem}\nversion: \"1\"\nmode: rubric\ncriteria:\n  - id: quality\n"
                    "    description: how good it is\n    scale: [1, 5]\n"
                    "    anchors: {1: bad, 2: weak, 3: fair, 4: good, 5: great}\n---\n" + body + "\n")
    return path


def cached_grid(tmp_path, url, topics: int):
    return grid(tmp_path / "c.yaml", url, name="c", topics=topics, models=[model("m1", url, price=PRICE)],
                judges=[judge("j", url, rubric=str(long_rubric(tmp_path / "long.md")), price=PRICE)],
                limits={"max_concurrency": 4, "retries": 0})


def test_most_judge_input_is_cached_and_the_records_equal_the_bill(tmp_path, fake):
    fake.configure(prefix_cache=True, tokenizer="cl100k", bill_per_mtok=BILL)
    done = run_stages(tmp_path, cached_grid(tmp_path, fake.url, 12))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    store = RunStore(done.run_dir)
    judged = [j.usage for j in store.read(Judgment)]
    assert len(judged) == 12 and all(j.ok for j in store.read(Judgment))
    prompt, cached = sum(u.prompt_tokens for u in judged), sum(u.cached_tokens or 0 for u in judged)
    assert cached / prompt >= 0.5, (cached, prompt)
    assert sum(u.cache_saved_usd or 0 for u in judged) == pytest.approx(cached * (2.5 - 1.25) / 1e6)
    billed = fake.stats()["billed"]
    assert billed["cached_tokens"] == cached  # the answers' short prompts were never cached
    recorded = sum(r.usage.cost_usd for kind in (Candidate, Judgment) for r in store.read(kind))
    assert recorded == pytest.approx(billed["usd"], rel=0.01)
    assert recorded < 0.75 * sum((u.prompt_tokens * 2.5 + u.completion_tokens * 10) / 1e6 for u in judged)
    shown = usage_by_judge(load_run(done.run_dir).judgments).row(0, named=True)  # the report's table
    assert shown["cached_tokens"] == cached and shown["cache"] == (
        f"cache saved ${cached * 1.25 / 1e6:.4f}, {round(100 * cached / prompt)}% of input")

    # 12 more items: the estimate expects the share the records show, and prices it at the cached price
    est = command(tmp_path, "estimate", str(cached_grid(tmp_path, fake.url, 24)), "--json")
    stage = next(s for s in json.loads(est.stdout)["stages"] if s["stage"] == "judge")
    assert stage["to_send"] == 12 and stage["cached_share"] == pytest.approx(cached / prompt, abs=0.02)
    more = run_stages(tmp_path, tmp_path / "c.yaml")
    assert more.returncode == 0, more.stdout[-2000:] + more.stderr[-2000:]
    paid = sum(j.usage.cost_usd for j in RunStore(more.run_dir).read(Judgment)) - sum(
        u.cost_usd for u in judged)
    assert stage["cost_usd_expected"] == pytest.approx(paid, rel=0.1)
    assert stage["cost_usd_max"] > 1.5 * paid  # the bound assumes no cache hit (and every reply at its limit)


def test_a_claude_judge_marks_the_end_of_its_fixed_part_for_the_cache(tmp_path):
    def messages(model_string: str, rubric_path) -> list[dict]:
        entry = JudgeEntry(id="j", model=model_string, rubric=str(rubric_path))
        return layout.judge_messages(SimpleNamespace(entry=entry, rubric=load_rubric(str(rubric_path), tmp_path)),
                                       "the item")

    long_path, short_path = long_rubric(tmp_path / "long.md"), long_rubric(tmp_path / "short.md", 3)
    claude, gpt = messages("anthropic/claude-haiku-4-5", long_path), messages("openai/gpt-4o-mini", long_path)
    assert claude[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert claude[0]["content"][0]["text"] == gpt[0]["content"] and claude[1] == gpt[1]
    assert isinstance(gpt[0]["content"], str)  # not Claude: OpenAI caches without a mark
    assert isinstance(messages("anthropic/claude-haiku-4-5", short_path)[0]["content"], str)  # too short to cache


def test_cached_and_cache_write_tokens_are_read_and_priced_from_litellms_usage():
    from litellm.types.utils import Usage  # LiteLLM's normalised usage of an Anthropic reply

    usage: dict = {"prompt_tokens": 3000, "completion_tokens": 100}
    prompt_cache(Usage(prompt_tokens=3000, completion_tokens=100, cache_read_input_tokens=2000,
                       cache_creation_input_tokens=500), usage)
    assert (usage["cached_tokens"], usage["cache_write_tokens"]) == (2000, 500)
    route = resolve(ModelSpec("anthropic/claude-haiku-4-5"))
    from bench.models._litellm import litellm

    entry = litellm().model_cost["claude-haiku-4-5"]
    assert cache_prices(route) == (entry["cache_read_input_token_cost"], entry["cache_creation_input_token_cost"])
    billed = (500 * entry["input_cost_per_token"] + 2000 * entry["cache_read_input_token_cost"]
              + 500 * entry["cache_creation_input_token_cost"] + 100 * entry["output_cost_per_token"])
    assert cost_usd(route, usage) == pytest.approx(billed)
    declared = resolve(ModelSpec("openai/x", api_base="http://127.0.0.1:9/v1", price=(2.0, 8.0, 0.5, None)))
    assert cache_prices(declared) == pytest.approx((0.5e-6, 2.5e-6))  # a write unpriced: 1.25 x input, never less
