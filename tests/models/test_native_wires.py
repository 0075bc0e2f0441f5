"""The LiteLLM route as most users beyond OpenAI take it: ``anthropic/…`` and ``gemini/…`` models and judges, through
LiteLLM's own translation, against the fake provider speaking Anthropic's Messages API and Gemini's generateContent.

One small grid per wire (a module fixture): a thinking and a plain model, a tip prompt with a long shared system
prompt (cache reads) and an image, an agent prompt with a tool; a rubric judge (Anthropic: one through
``output_format``, one through a forced tool), a pairwise judge and a trajectory judge; a budget; 429s and the
wire's overload errors retried. The records' usage and cost are what the fake billed."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json

import pytest

from bench.core.errors import PreflightError
from bench.core.records import Candidate, Judgment, Usage
from bench.core.store import RunStore
from bench.models.preflight import preflight
from bench.models.routing import ModelSpec
from bench.testing.grids import grid, prompt
from bench.testing.in_process import run_stages
from tests.judge.conversation_runs import rubric_file

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
PRICE = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}
LONG = " ".join(f"rule{i}" for i in range(1100))  # a system prompt over 1,024 tokens: later scenarios read it cached
WIRES = {  # vendor: (api_base path on the fake, thinking model + params, plain model, forced-tool judge model)
    "anthropic": ("", ("claude-sonnet-4-5", {"thinking": {"type": "enabled", "budget_tokens": 1024},
                                             "max_tokens": 3000}),
                  "claude-haiku-4-5", "claude-3-haiku-20240307"),
    "gemini": ("/v1beta", ("gemini-2.5-flash", {"reasoning_effort": "low"}), "gemini-2.5-flash-lite", None),
}
WEATHER = {"name": "get_weather", "description": "Current weather in a city", "result": "Weather in {city}: sunny",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def entry(eid: str, vendor: str, name: str, base: str, **extra) -> dict:
    return {"id": eid, "model": f"{vendor}/{name}", "api_base": base, "price": PRICE, **extra}


@pytest.fixture(scope="module", params=list(WIRES))
def wire_run(request, tmp_path_factory, fake_server):
    """Sweep one wire's grid in-process; return (vendor, run folder, the fake's stats, what the sweep printed)."""
    vendor = request.param
    path, (think, think_params), plain, forced = WIRES[vendor]
    base = fake_server.url.removesuffix("/v1") + path
    tmp = tmp_path_factory.mktemp(f"wire-{vendor}")
    (tmp / "dot.png").write_bytes(PNG)
    rows = [{"topic": f"t{i}", "question": f"WEATHER in city{i}?", "img": "dot.png" if i == 0 else None}
            for i in range(3)]
    (tmp / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    checks = rubric_file(tmp, "agent", "mode: automated\nchecks:\n  - {id: searched, kind: tool_called, name: "
                                       "get_weather, schema: {type: object, required: [city]}}\n"
                                       "  - {id: quick, kind: max_steps, limit: 2}\n")
    judges = [entry("rubric", vendor, plain, base, rubric="tip-v1"),
              entry("pairwise", vendor, plain, base, rubric="arena-pairwise", baseline="plain/tip@v1"),
              entry("agent", vendor, plain, base, rubric=checks)]
    if forced:  # a model LiteLLM's map does not list: JSON through a forced tool, not output_format
        judges.append(entry("forced", vendor, forced, base, rubric="tip-v1"))
    grid(tmp / "w.yaml", base, name=f"w-{vendor}",
         models=[entry("think", vendor, think, base, params=think_params), entry("plain", vendor, plain, base)],
         prompts=[prompt("tip", "One tip about {topic}.", system=LONG),
                  prompt("agent", "{question}", tools=["get_weather"], max_steps=3)],
         tools=[WEATHER], judges=judges,
         scenarios={"dataset": {"path": "rows.jsonl", "fields": {"topic": "topic", "question": "question"},
                                "images": ["img"]}},
         limits={"max_concurrency": 4, "timeout_s": 20, "retries": 8, "backoff_s": 0.01, "backoff_max_s": 0.05,
                 "budget_usd": 5.0})
    fake_server.reset()
    fake_server.configure(reasoning_content=[think], tool_calls=[{"match": "WEATHER", "name": "get_weather",
                                                                  "arguments": {"city": "Paris"}}],
                          bill_per_mtok={"input": 3.0, "output": 15.0}, rate_429=0.1, rate_500=0.05,
                          retry_after_s=0, seed=7)
    out = run_stages(tmp, tmp / "w.yaml")
    assert out.returncode == 0, out.log[-4000:]
    stats = fake_server.stats()
    fake_server.reset()
    return vendor, tmp / "runs" / f"w-{vendor}", stats, out.stdout


def records(run):
    store = RunStore(run)
    return list(store.latest(Candidate).values()), list(store.latest(Judgment).values())


def test_every_answer_and_grade_comes_back_through_the_wire(wire_run):
    vendor, run, stats, _ = wire_run
    cands, judgments = records(run)
    assert len(cands) == 12 and all(c.ok for c in cands)  # 2 models x 2 prompts x 3 scenarios
    assert all(b["_wire"] == vendor for b in stats["recent"])
    overload = {"anthropic": "529", "gemini": "503"}[vendor]
    assert stats["statuses"].get("429") and stats["statuses"].get(overload), stats["statuses"]  # retried, all ok
    by_judge = {}
    for j in judgments:
        by_judge.setdefault(j.judge_id, []).append(j)
    assert all(j.ok for j in judgments), [j.error for j in judgments if not j.ok]
    assert {len(by_judge["rubric"]), len(by_judge["agent"])} == {12}
    assert all(set(j.scores) == {"relevance", "actionability", "tone"} and
               all(1 <= v <= 5 for v in j.scores.values()) for j in by_judge["rubric"]), by_judge["rubric"][0].scores
    labels = {"A>>B", "A>B", "A=B", "B>A", "B>>A"}  # 3 cells against the baseline, 3 scenarios, both orders
    assert len(by_judge["pairwise"]) == 18 and {j.verdict for j in by_judge["pairwise"]} <= labels
    if vendor == "anthropic":  # JSON through output_format (a listed model) and through a forced tool
        assert len(by_judge["forced"]) == 12
        sent = [b for b in stats["recent"] if "response_format" in b]
        assert {b["model"]: "_forced_tool" in b for b in sent} == {"claude-haiku-4-5": False,
                                                                   "claude-3-haiku-20240307": True}


def test_the_thinking_stays_apart_from_the_answer(wire_run):
    vendor, run, _, _ = wire_run
    cands, _ = records(run)
    for c in cands:
        thinks = c.model_id == "think"
        assert "fake reasoning" not in c.output and c.output.startswith("fake answer"), c.output
        assert (c.reasoning or "").startswith("fake reasoning") == thinks, (c.model_id, c.reasoning)
        assert bool(c.usage.reasoning_tokens) == thinks, (c.model_id, c.usage)


def test_the_agent_calls_its_tool_and_the_trajectory_checks_grade_it(wire_run):
    """A thinking Claude's signed thinking goes back with its tool calls (else Anthropic refuses the next step)."""
    vendor, run, _, _ = wire_run
    cands, judgments = records(run)
    agents = [c for c in cands if c.prompt_id == "agent"]
    assert len(agents) == 6 and all(c.ok for c in agents), [c.error for c in agents]
    calling = [m for c in agents if c.model_id == "think" for m in c.transcript if m.get("tool_calls")]
    if vendor == "anthropic":
        assert len(calling) == 3 and all(m["thinking_blocks"][0]["signature"] for m in calling)
    for c in agents:
        assert [(t["name"], t["arguments"], t["outcome"]) for t in c.trajectory] == [
            ("get_weather", {"city": "Paris"}, "ok")] and c.ended == "answered"
        assert c.output.endswith("[tools: Weather in Paris: sunny]"), c.output  # the tool result went back
    graded = {j.candidate_ids[0]: j.scores for j in judgments if j.judge_id == "agent"}
    assert all(graded[c.id] == {"searched": 1.0, "quick": 1.0} for c in agents)


def test_the_image_reaches_the_model_as_the_wire_sends_it(wire_run):
    _, _, stats, _ = wire_run
    (digest, times), = stats["images"].items()  # row 0's image: 2 models x (1 tip + 2 agent requests), retries too
    assert digest == hashlib.sha256(PNG).hexdigest() and times >= 6


def test_records_cost_what_the_fake_billed_within_the_budget(wire_run):
    _, run, stats, printed = wire_run
    cands, judgments = records(run)
    assert "every reply cost at most what it reserved" in printed  # each paid request reserved its worst case first
    usages = [r.usage for r in cands + judgments if r.usage.calls]
    billed = stats["billed"]
    assert sum(u.prompt_tokens for u in usages) == billed["prompt_tokens"]
    assert sum(u.completion_tokens for u in usages) == billed["completion_tokens"]
    assert sum(u.cost_usd for u in usages) == pytest.approx(billed["usd"], rel=1e-9) and billed["usd"] < 5.0
    assert billed["cached_tokens"] >= 1024 * 2 * 2  # scenarios 2 and 3 of each model's tip prompt
    if "cached_tokens" in Usage.model_fields:  # the records carry cached tokens (the cached-price issue)
        assert sum(u.cached_tokens or 0 for u in usages) == billed["cached_tokens"]


def test_the_preflight_asks_each_wire_where_it_lists_its_models(fake):
    """Anthropic's api_base lists at /v1/models (also when written with /v1 or /v1/messages), Gemini's at
    <api_base>/models in its own shape: a name the server does not serve is named before anything is sent; a
    listing that wants a key is said to be unchecked, not a failure."""
    root = fake.url.removesuffix("/v1")
    fake.configure(served_models=["claude-haiku-4-5", "gemini-2.5-flash"])
    served = [ModelSpec("anthropic/claude-haiku-4-5", api_base=root + "/v1/messages"),
              ModelSpec("gemini/gemini-2.5-flash", api_base=root + "/v1beta")]
    preflight(served)
    with pytest.raises(PreflightError) as err:
        preflight([*served, ModelSpec("anthropic/claude-opus-4-5", api_base=root + "/v1"),
                   ModelSpec("gemini/gemini-2.5-pro", api_base=root + "/v1beta")])
    assert [p.split(":")[0] for p in err.value.problems] == ["model 'anthropic/claude-opus-4-5'",
                                                             "model 'gemini/gemini-2.5-pro'"], err.value.problems
    fake.configure(require_key="sk-fake-listing-key-123")
    with pytest.warns(UserWarning, match=r"v1beta/models lists its models only to a caller with a key \(HTTP 403\)"):
        preflight([ModelSpec("gemini/gemini-2.5-pro", api_base=root + "/v1beta")])


def test_the_fake_caches_a_repeated_prefix_and_litellm_reads_it(fake):
    """The fake's cache-read tokens reach LiteLLM's usage on both wires (``prompt_tokens_details.cached_tokens``)."""
    litellm = pytest.importorskip("litellm")
    root = fake.url.removesuffix("/v1")
    messages = [{"role": "system", "content": LONG}, {"role": "user", "content": "Hello."}]

    async def twice(model: str, base: str) -> list:
        return [(await litellm.acompletion(model=model, messages=messages, api_base=base, api_key="k")).usage
                for _ in range(2)]

    for model, base in (("anthropic/claude-haiku-4-5", root), ("gemini/gemini-2.5-flash", root + "/v1beta")):
        first, second = asyncio.run(twice(model, base))
        assert (first.prompt_tokens_details.cached_tokens or 0, second.prompt_tokens_details.cached_tokens) == (0, 1024)
        assert second.prompt_tokens == first.prompt_tokens  # the cached tokens are part of the prompt, as billed
    assert fake.stats()["billed"]["cached_tokens"] == 2048
