"""The dry-run provider (bench.models.dry): ``dry/<name>`` answers in-process through the real client path."""

from __future__ import annotations

import asyncio
import json
import random
from types import SimpleNamespace

import jsonschema
import pytest
import yaml

from bench.config.rubrics import load_rubric
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.judge.replies import extract_json, parse_verdict, validate_scores
from bench.models import dry
from bench._schema_instance import SchemaInstance
from bench.models.client import LLM, Limits
from bench.models.genparams import param_problems, supported_params
from bench.models.preflight import preflight
from bench.models.routing import ModelSpec, resolve
from bench.testing.in_process import command, run_stages
from tests.repo import REPO

SPEC = ModelSpec("dry/gpt-4o", params={"temperature": 0.2})
QUESTION = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "How should a small bakery price its sourdough bread and pastries?"}]
# The instructions of a pairwise judge prompt (bench.judge's PAIR_USER): a verdict in double brackets.
PAIR = ("The model was asked:\n<prompt-x>\nExplain photosynthesis briefly.\n</prompt-x>\n\nResponse A:\n"
        "<response-xa>\nPlants turn light into sugar.\n</response-xa>\n\nResponse B:\n<response-xb>\n"
        "Chlorophyll absorbs light; water and carbon dioxide become glucose and oxygen.\n</response-xb>\n\n"
        "Compare the two responses. Explain briefly, then give your verdict as one of {labels}, written in "
        "double brackets, e.g. [[A>B]]; or reply with a JSON object {{\"verdict\": \"...\", \"rationale\": \"...\"}}.")


def rf(name: str, schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def ask(messages: list[dict], llm: LLM | None = None, spec: ModelSpec = SPEC, **kw):
    llm = llm or LLM(Limits(max_concurrency=4))

    async def go():
        try:
            return await llm.complete(spec, messages, **kw)
        finally:
            await llm.aclose()

    return asyncio.run(go())


def test_a_rubric_schema_is_answered_with_a_valid_instance() -> None:
    tip = load_rubric("tip-v1", REPO)
    scales = {c.id: (int(c.scale[0]), int(c.scale[1])) for c in tip.criteria}
    grade = ask(QUESTION, response_format=rf("grade", tip.item_schema()))
    obj = json.loads(grade.text)
    jsonschema.validate(obj, tip.item_schema())
    assert set(validate_scores(obj, scales)) == set(scales) and obj["rationale"].strip()

    ids = ["i1a2b3c", "i4d5e6f", "i7a8b9c"]
    packed = json.loads(ask(QUESTION, response_format=rf("grades", tip.packed_schema(ids))).text)
    jsonschema.validate(packed, tip.packed_schema(ids))
    assert sorted(g["id"] for g in packed["grades"]) == sorted(ids)  # one grade per item shown

    checklist = load_rubric("tip-checklist", REPO)
    answer = extract_json(ask(QUESTION, response_format=rf("requirement", checklist.requirement_schema())).text)
    jsonschema.validate(answer, checklist.requirement_schema())
    assert isinstance(answer["fulfilled"], bool)

    arena = load_rubric("arena-pairwise", REPO)
    labels = list(arena.labels)
    shown = ask([{"role": "user", "content": PAIR.format(labels=", ".join(labels))}],
                response_format=rf("verdict", arena.pairwise_schema()))
    jsonschema.validate(json.loads(shown.text), arena.pairwise_schema())
    assert parse_verdict(shown.text, labels) in labels


def test_a_pairwise_prompt_without_a_schema_gets_a_verdict_that_parses() -> None:
    for labels in (["A>B", "A=B", "B>A"], list(load_rubric("arena-pairwise", REPO).labels)):
        seen = set()
        for sample in range(12):
            reply = ask([{"role": "user", "content": PAIR.format(labels=", ".join(labels))}], sample=sample)
            seen.add(parse_verdict(reply.text, labels))
            assert reply.text.count("[[") == 1  # one verdict, nothing ambiguous
        assert seen <= set(labels) and len(seen) > 1  # verdicts vary with the request, within the labels


def test_usage_is_realistic_and_costs_nothing(tmp_path) -> None:
    llm = LLM(Limits(max_concurrency=4), cache=str(tmp_path / "c.sqlite"))
    first = ask(QUESTION, llm)
    chars = sum(len(m["content"]) for m in QUESTION)
    assert chars // 4 <= first.usage.prompt_tokens <= chars // 4 + 20
    assert 50 <= first.usage.completion_tokens <= 400 and first.usage.completion_tokens == -(-len(first.text) // 4)
    assert first.usage.cost_usd == 0.0 and first.usage.calls == 1 and not first.usage.cached
    assert first.usage.finish_reason == "stop" and first.usage.latency_s is not None and first.raw is not None
    again = ask(QUESTION, LLM(Limits(), cache=str(tmp_path / "c.sqlite")))  # the response cache answers it
    assert again.usage.cached and again.text == first.text and again.usage.calls == 0

    priced = ask(QUESTION, spec=ModelSpec("dry/gpt-4o", price=(5.0, 15.0)))
    assert priced.usage.cost_usd == 0.0  # a dry run never costs, whatever price the model it stands in for has
    short = ask(QUESTION, params={"max_tokens": 8})
    assert short.usage.finish_reason == "length" and short.usage.completion_tokens <= 8


def test_replies_are_deterministic() -> None:
    rubric = load_rubric("tip-v1", REPO)
    for kw in ({}, {"response_format": rf("grade", rubric.item_schema())}):
        one, two = ask(QUESTION, **kw), ask(QUESTION, **kw)
        assert one.text == two.text and one.usage.completion_tokens == two.usage.completion_tokens
    texts = {ask(QUESTION, sample=s).text for s in range(4)}
    assert len(texts) == 4  # repeats of one request are different samples, each reproducible


def test_dry_models_need_no_key_no_server_and_take_the_usual_params() -> None:
    assert dry.dry_model("openai/gpt-4o") == "dry/gpt-4o" and dry.dry_model("gpt-4o") == "dry/gpt-4o"
    assert dry.dry_model("dry/gpt-4o") == "dry/gpt-4o" and dry.dry_model("local/gemma-3-270m") == "dry/gemma-3-270m"
    spec = ModelSpec("dry/claude", api_base="http://127.0.0.1:9/v1", api_key_env="BENCH_DRY_UNSET_KEY")
    route = resolve(spec)
    assert route.transport == "dry" and route.key_env is None and route.api_base is None and route.identity == "dry"
    preflight([spec, SPEC], probe_timeout_s=0.5)  # nothing listens on port 9: no probe was made
    assert supported_params("dry/claude", None) is None
    entry = SimpleNamespace(id="m", model="dry/claude", api_base=None,
                            params={"temperature": 0, "max_tokens": 64, "seed": 1, "top_k": 5, "extra_body": {"x": 1}})
    assert param_problems([("models[0]", entry)]) == []
    reply = ask(QUESTION, spec=spec)
    assert reply.text and reply.usage.cost_usd == 0.0


SCHEMA = {
    "type": "object",
    "$defs": {"step": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 3}},
                       "required": ["n"], "additionalProperties": False}},
    "properties": {
        "score": {"type": "integer", "minimum": -2, "exclusiveMaximum": 4},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "even": {"type": "integer", "minimum": 3, "maximum": 11, "multipleOf": 2},
        "label": {"type": "string", "enum": ["good", "bad"]},
        "fixed": {"const": 7},
        "short": {"type": "string", "minLength": 3, "maxLength": 12},
        "padded": {"type": "string", "minLength": 400},
        "when": {"type": "string", "format": "date-time"},
        "maybe": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
        "either": {"type": ["string", "null"], "maxLength": 5},
        "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}, "minItems": 2, "maxItems": 4},
        "both": {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                           {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]},
    },
    "required": ["score", "ratio", "even", "label", "fixed", "short", "padded", "steps", "both"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("seed", range(40))
def test_schema_instances_are_valid(seed: int) -> None:
    rng = random.Random(seed)
    obj = SchemaInstance(SCHEMA, rng, lambda r, limit: "word " * 30).of(SCHEMA)
    jsonschema.validate(obj, SCHEMA)
    assert set(SCHEMA["required"]) <= set(obj)


def test_bench_sweep_dry_run_runs_every_stage_without_a_server_or_a_key(tmp_path) -> None:
    """`bench sweep PARAMS --dry-run`: real model strings (no key set, nothing reachable) swapped for dry/<name>."""
    params = tmp_path / "real.yaml"
    params.write_text(yaml.safe_dump({
        "name": "paid", "seed": 1,
        "models": [{"id": "big", "model": "openai/gpt-4o", "api_key_env": "BENCH_TEST_UNSET_KEY", "rpm": 1},
                   {"id": "vllm", "model": "openai/llama", "api_base": "http://127.0.0.1:9/v1"},
                   {"id": "vllm2", "model": "openai/llama", "api_base": "http://127.0.0.1:8/v1"}],  # endpoint only
        "prompts": [{"id": "p", "version": "v1", "user": "One tip about {topic}."}],
        "scenarios": {"generate": {"dimensions": {"topic": ["sleep", "focus", "diet"]}}},
        "judges": [{"id": "grader", "model": "anthropic/claude-3-5-sonnet-20240620", "rubric": "tip-v1"},
                   {"id": "arena", "model": "openai/gpt-4o", "rubric": "arena-pairwise", "mode": "pairwise",
                    "baseline": "big/p@v1"}],
    }))
    out = command(tmp_path, "sweep", str(params), "--dry-run", "--no-report", "--no-track")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "dry run:" in out.stdout
    store = RunStore(tmp_path / "runs" / "paid-dry")
    cands = list(store.latest(Candidate).values())
    judgments = list(store.latest(Judgment).values())
    assert len(cands) == 9 and all(c.ok and c.model.startswith("dry/") for c in cands)
    assert {c.model for c in cands} == {"dry/big", "dry/vllm", "dry/vllm2"}  # entries stay distinct
    assert {j.judge_id for j in judgments} == {"grader", "arena"} and all(j.ok for j in judgments)
    assert sum(1 for j in judgments if j.mode == "pairwise") == 2 * 2 * 3  # two challengers, both orders
    assert all((c.usage.cost_usd or 0) == 0 and c.usage.prompt_tokens > 0 for c in cands)
    assert not (tmp_path / "runs" / "paid").exists()  # a dry run never writes into the real run's folder


def test_a_dry_run_never_writes_where_real_results_are(tmp_path) -> None:
    """--run-dir is refused with --dry-run; a hint printed by a dry run keeps --dry-run (never a paid command)."""
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({
        "name": "paid", "models": [{"id": "big", "model": "openai/gpt-4o"}],
        "prompts": [{"id": "p", "version": "v1", "user": "One tip about {topic}."}],
        "scenarios": {"generate": {"dimensions": {"topic": ["sleep"]}}},
        "judges": [{"id": "grader", "model": "openai/gpt-4o", "rubric": "tip-v1"}]}))
    out = command(tmp_path, "sweep", str(params), "--dry-run", "--run-dir", str(tmp_path / "runs" / "paid"))
    assert out.returncode == 2 and "drop --run-dir" in out.stderr, out.stderr
    assert not (tmp_path / "runs" / "paid").exists()
    out = command(tmp_path, "sweep", str(params), "--dry-run", "--only-stage", "judge", "--no-report", "--no-track")
    assert out.returncode == 2 and "--only-stage collect --dry-run" in out.stderr, out.stderr


@pytest.mark.parametrize("limit", ["max_tokens", "max_completion_tokens", "num_predict", "maxOutputTokens"])
def test_a_dry_reply_honours_the_output_limit_under_any_providers_name(limit) -> None:
    """The rate limiter's estimate and the dry reply read the same output limit (bench.models._messages)."""
    text, usage, _raw = dry.answer({"messages": QUESTION, limit: 4}, seed="s")
    assert usage["finish_reason"] == "length" and usage["completion_tokens"] <= 5, (limit, text)


def test_a_dry_run_answers_the_simulated_user_in_process_too(tmp_path) -> None:
    """A prompt's user_simulator is a model like the others: --dry-run swaps it for dry/<its id>, never sends it."""
    params = tmp_path / "sim.yaml"
    params.write_text(yaml.safe_dump({
        "name": "sim", "seed": 1,
        "models": [{"id": "vllm", "model": "openai/llama", "api_base": "http://127.0.0.1:9/v1"}],
        "prompts": [{"id": "p", "version": "v1", "user": "Hi, I need help with {topic}.",
                     "user_simulator": {"id": "customer", "model": "openai/gpt-4o", "api_base": "http://127.0.0.1:8/v1",
                                        "instructions": "You are a customer asking about {topic}.", "max_turns": 3}}],
        "scenarios": {"generate": {"dimensions": {"topic": ["sleep", "focus"]}}},
    }))
    out = run_stages(tmp_path, params, dry_run=True)
    assert out.returncode == 0, out.stdout + out.stderr
    cands = list(RunStore(tmp_path / "runs" / "sim-dry").latest(Candidate).values())
    assert len(cands) == 2 and all(c.ok and c.ended in ("max_turns", "user_done") for c in cands), cands
    simulated = [t for c in cands for t in c.turns if t["by"] == "simulator"]
    assert simulated and all(t["usage"]["cost_usd"] == 0 for t in simulated)
    assert all(c.simulator_usage.calls >= 1 for c in cands)
