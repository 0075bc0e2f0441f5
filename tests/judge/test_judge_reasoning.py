"""A reasoning model in a run, end to end on the fake provider: its thinking is stored in ``reasoning``, never in
``output``; judges see only the answer unless the rubric asks for the reasoning; two efforts are two cells; a
judge asking for logprobs that get none keeps its sampled score with a note; a param the model refuses is caught
before any request; the estimate and the usage tables count the thinking as output."""

from __future__ import annotations

import asyncio
import json

import pytest

from bench.analysis import load_run, usage_by_cell
from bench.config.entries import JudgeEntry
from bench.config.rubrics import load_rubric
from bench.core.errors import ParamsError
from bench.core.records import Candidate, Judgment, Scenario
from bench.core.store import RunStore
from bench.estimate import estimate
from bench.estimate.show import estimate_table
from bench.judge.grader import Item, Judge, grade_items
from bench.judge.logprobs import NO_LOGPROBS
from bench.models.client import LLM, Limits
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing.grids import ROOT, grid, judge, model, rubric
from bench.testing.in_process import command



@pytest.fixture(autouse=True)
def own_runs(tmp_path, monkeypatch):
    """Keep each test's runs and response cache in its own folder (never the checkout's runs/)."""
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))


def reasoning_grid(tmp_path, url, *, show: bool = False, judge_params: dict | None = None, judge_id: str = "grader",
                   pack_size: int = 0, **models) -> object:
    """Write a grid of a thinking model at two efforts and one rubric judge; return the opened run."""
    path = rubric(tmp_path / "graded.md")
    if show:
        path.write_text(path.read_text().replace("mode: rubric\n", "mode: rubric\nshow_reasoning: true\n", 1))
    params = grid(tmp_path / "r.yaml", url, name="r", topics=2,
                  models=models.get("models") or [model("low", url, name="thinker", params={"reasoning_effort": "low"}),
                                                  model("high", url, name="thinker",
                                                        params={"reasoning_effort": "high"})],
                  judges=[judge(judge_id, url, rubric=str(path), name="judge", params=judge_params or {},
                                pack_size=pack_size)])
    return open_run(params, run_dir=tmp_path / "runs" / "r")


def judge_prompts(fake) -> list[str]:
    """Return the text of every judge request the fake provider saw (the rubric's marker names them)."""
    return [json.dumps(b["messages"]) for b in fake.stats()["recent"] if "MARKER-GRADED-RUBRIC" in json.dumps(b)]


def collect_and_judge(run) -> tuple[list[Candidate], list[Judgment]]:
    asyncio.run(run_collect(run, progress="none", judge=True))
    store = RunStore(run.dir)
    return list(store.latest(Candidate).values()), list(store.latest(Judgment).values())


def test_the_answer_is_stored_without_its_reasoning_and_the_judge_never_sees_it(fake, tmp_path):
    fake.configure(reasoning_content=["thinker"])
    cands, judgments = collect_and_judge(reasoning_grid(tmp_path, fake.url))
    assert len(cands) == 4 and all(c.ok for c in cands) and len(judgments) == 4 and all(j.ok for j in judgments)
    for c in cands:
        assert c.reasoning.startswith("fake reasoning") and "fake reasoning" not in c.output
        assert c.usage.reasoning_tokens > 0
    prompts = judge_prompts(fake)  # one per distinct answer: both efforts answer alike, and think differently
    assert prompts and all("fake reasoning" not in p for p in prompts), "the judge sees the answer only"
    assert all(any(c.output in p for p in prompts) for c in cands)


def test_a_rubric_with_show_reasoning_shows_it_in_a_block_of_its_own(fake, tmp_path):
    fake.configure(reasoning_content=["thinker"])
    cands, judgments = collect_and_judge(reasoning_grid(tmp_path, fake.url, show=True))
    assert all(j.ok for j in judgments)
    prompts = judge_prompts(fake)
    for c in cands:
        shown = [json.loads(p)[1]["content"] for p in prompts if c.output in p]
        assert any(c.reasoning in p and "<reasoning-" in p for p in shown)


def test_two_efforts_of_one_model_are_two_cells_and_the_usage_counts_their_thinking(fake, tmp_path):
    fake.configure(reasoning_content=["thinker"])
    run = reasoning_grid(tmp_path, fake.url)
    assert [c.key for c in run.cells] == ["low/p@v1", "high/p@v1"]
    cands, _ = collect_and_judge(run)
    assert len({c.id for c in cands}) == 4, "the effort is part of each answer's identity"
    usage = {r["cell"]: r for r in usage_by_cell(load_run(run.dir).candidate_attempts).iter_rows(named=True)}
    assert usage["low/p@v1"]["reasoning_tokens"] < usage["high/p@v1"]["reasoning_tokens"]
    assert usage["low/p@v1"]["completion_tokens"] < usage["high/p@v1"]["completion_tokens"]


def test_the_estimate_says_the_thinking_is_counted_as_output(fake, tmp_path):
    run = reasoning_grid(tmp_path, fake.url)
    table = estimate_table(estimate(run))
    line = next(ln for ln in table.splitlines() if ln.startswith("reasoning:"))
    assert "low" in line and "high" in line and "priced as output" in line
    assert fake.stats()["requests"] == 0


@pytest.mark.parametrize("pack_size", [1, 2])
def test_a_logprob_judge_without_logprobs_keeps_its_sampled_score_with_a_note(fake, tmp_path, pack_size):
    fake.configure(logprobs_supported=False)
    run = reasoning_grid(tmp_path, fake.url, judge_params={"logprobs": True, "top_logprobs": 5},
                         judge_id=f"lp{pack_size}", pack_size=pack_size,  # warned once per judge and process
                         models=[model("m", fake.url)])
    with pytest.warns(RuntimeWarning, match="asked for logprobs but the provider returned none"):
        _cands, judgments = collect_and_judge(run)
    assert len(judgments) == 2 and all(j.ok and j.score is not None for j in judgments)
    assert all(j.expected_score is None and j.details["logprobs"] == NO_LOGPROBS for j in judgments)
    assert all(bool(j.pack_id) == (pack_size > 1) for j in judgments)


@pytest.mark.parametrize("entry, refused", [
    ({"model": "openai/o3-mini", "params": {"temperature": 0.2}}, "temperature=0.2"),
    ({"model": "openai/gpt-5", "params": {"top_p": 0.5}, "transport": "litellm"}, "top_p"),
    ({"model": "openai/gpt-5", "params": {"logprobs": True}}, "logprobs"),
])
def test_a_param_a_reasoning_model_refuses_is_caught_before_any_request(fake, tmp_path, entry, refused):
    params = grid(tmp_path / "refused.yaml", fake.url, models=[{"id": "thinker", "api_base": fake.url, **entry}])
    with pytest.raises(ParamsError) as err:
        open_run(params, run_dir=tmp_path / "runs" / "x")
    line = str(err.value)
    assert f"models[0].params.{refused.split('=')[0]}" in line and entry["model"] in line and "thinker" in line
    assert refused in line.split(":", 1)[1], "the reason names the param"
    out = command(tmp_path, "validate", str(params))
    assert out.returncode != 0 and refused in out.stdout + out.stderr
    assert fake.stats()["requests"] == 0, "refused before any request"


def test_a_pairwise_judge_shows_each_reasoning_after_its_own_response_in_both_orders(fake, tmp_path):
    path = tmp_path / "arena-shown.md"
    path.write_text((ROOT / "rubrics/arena-pairwise.md").read_text().replace("id: arena-pairwise", "id: arena-shown")
                    .replace("mode: pairwise\n", "mode: pairwise\nshow_reasoning: true\n", 1))
    fake.configure(replies=[{"match": "Compare the two responses", "content": "[[A>B]]"}])
    pair = Judge(JudgeEntry(id="arena", model="openai/judge", api_base=fake.url, rubric=str(path)),
                 load_rubric(str(path), ROOT))
    item = Item(Scenario(fields={"q": 1}), "Which is right?", ("answer one", "answer two"), ("c1", "c2"),
                reasonings=("thought one", "thought two"))
    out: list = []

    async def go():
        llm = LLM(Limits(max_concurrency=2, timeout_s=20))
        try:
            await grade_items(pair, [item], llm, out.append)
        finally:
            await llm.aclose()
    asyncio.run(go())
    assert sorted(j.order for j in out) == ["AB", "BA"] and all(j.ok for j in out)
    for body in fake.stats()["recent"]:
        text = body["messages"][1]["content"]
        at = {k: text.index(k) for k in ("answer one", "thought one", "answer two", "thought two")}
        first, second = ("one", "two") if at["answer one"] < at["answer two"] else ("two", "one")
        assert at[f"answer {first}"] < at[f"thought {first}"] < at[f"answer {second}"] < at[f"thought {second}"]
