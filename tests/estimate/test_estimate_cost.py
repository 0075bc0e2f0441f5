"""`bench estimate` and the pre-sweep budget check, against real sweeps on the loopback fake provider.

The fake provider counts usage with OpenAI's cl100k tokenizer here (``tokenizer: "cl100k"``), so the
estimate's token counts can be held to the records': the requests it predicts are exactly the ones the
fake receives (per stage), its input tokens are within 10% of the records' prompt tokens, and once an
earlier run of the same cells exists, its expected output tokens are within 10% of what the next sweep's
records say. A budget that the expected cost passes refuses the sweep before anything is sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bench.core.records import Candidate, Judgment
from bench.core.spend import recorded_spend
from bench.core.store import RunStore
from bench.estimate.cost import REPAIR_TOKENS, TOTALS, needed_budget
from bench.models.budget import dollars
from bench.models.routing import ModelSpec, price_per_token, resolve
from bench.models.tokens import counter_for, output_bound
from bench.run import open_run
from bench.testing.grids import grid, judge, model, prompt
from bench.testing.in_process import command, run_stages
from tests.staged import run_planned

PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0}
STAGE_KEYS = {"stage", "id", "requests", "cached", "input_tokens", "output_tokens_max", "cost_usd_max",
              "cost_usd_expected", "cost_usd_expected_direct", "cost_usd_expected_batch", "output_tokens_expected",
              "repairs_max", "held", "cache_hits", "to_send", "unknown", "mode", "model", "batch", "output_bound",
              "output_bound_from", "expected_from", "repair_rate", "tokenizer", "tokenizer_note", "price_known",
              "cost_usd_min", "reasoning", "images", "bounded_by", "cached_share"}


def jury(url: str) -> list[dict]:
    return [judge("rubric", url, price=PRICE), judge("packed", url, pack_size=3, price=PRICE),
            judge("checker", url, rubric="tip-checklist", price=PRICE),
            judge("arena", url, rubric="arena-pairwise", baseline="m1/p@v1", price=PRICE),
            judge("hybrid", url, rubric="tip-hybrid", price=PRICE)]


def params_for(tmp_path: Path, url: str, *, topics: int = 4, judges: list | None = None, price: dict | None = PRICE,
               name: str = "est", **limits) -> Path:
    prompts = [prompt("p", "One tip about {topic}."), prompt("q", "Give one tip about {topic}.")]  # two cells
    extra = {"price": price} if price else {}
    return grid(tmp_path / f"{name}.yaml", url, name=name, topics=topics, prompts=prompts, judges=judges,
                models=[model("m1", url, params={"max_tokens": 12}, **extra)],
                limits={"max_concurrency": 6, "timeout_s": 10, "retries": 0, **limits})


def estimate_json(tmp_path: Path, params: Path, *args: str) -> dict:
    out = command(tmp_path, "estimate", str(params), "--json", *args)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def by_stage(est: dict) -> dict[str, dict]:
    return {s["id"]: s for s in est["stages"]}


def recorded(run_dir: Path, field: str, skip: set[str] = frozenset()) -> dict[str, int]:
    """Return the records' ``usage.<field>`` summed per model id (candidates) and per judge id (judgments)."""
    out: dict[str, int] = {}
    store = RunStore(run_dir)
    for rec in [*store.iter(Candidate), *store.iter(Judgment)]:
        if rec.usage is not None and rec.id not in skip and not rec.usage.cached:
            who = rec.model_id if isinstance(rec, Candidate) else rec.judge_id
            out[who] = out.get(who, 0) + (getattr(rec.usage, field) or 0)
    return out


def within(estimated: float, actual: float, tolerance: float = 0.10) -> bool:
    return abs(estimated - actual) <= tolerance * actual


def test_the_estimate_is_the_sweeps_requests_exactly_and_its_tokens_within_10_percent(tmp_path, fake):
    fake.configure(tokenizer="cl100k")
    params = params_for(tmp_path, fake.url, judges=jury(fake.url))
    est = estimate_json(tmp_path, params)
    assert fake.stats()["requests"] == 0  # estimating calls nothing
    assert set(est) == {"stages", "total", "budget"} and est["budget"] is None  # no limits.budget_usd
    assert all(set(s) == STAGE_KEYS for s in est["stages"])
    assert set(est["total"]) == set(TOTALS)
    stages = by_stage(est)
    assert [s["stage"] for s in est["stages"]] == ["collect"] + ["judge"] * 5
    assert stages["arena"]["requests"] == 4 * 2  # q's 4 answers against the baseline p's, both orders
    assert stages["checker"]["requests"] == 8 * 5  # one request per requirement
    assert stages["packed"]["requests"] == -(-8 // 3)  # 3 answers to a packed call
    assert stages["rubric"]["unknown"] == 8  # its answers are not collected yet: stand-ins
    for key in TOTALS:
        assert est["total"][key] == pytest.approx(sum(s[key] for s in est["stages"]))

    ran = run_stages(tmp_path, params)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "estimate (before anything is sent):" in ran.stdout
    by_model = fake.stats()["by_model"]
    for s in est["stages"]:  # every stage's model is served under its own name: m1, rubric, packed, …
        assert s["requests"] - s["cached"] == by_model.get(s["id"], 0), (s["id"], by_model)
    assert est["total"]["requests"] - est["total"]["cached"] == fake.stats()["requests"]

    prompt_tokens = recorded(tmp_path / "runs/est", "prompt_tokens")
    assert within(est["total"]["input_tokens"], sum(prompt_tokens.values())), (est["total"], prompt_tokens)
    for s in est["stages"]:
        assert within(s["input_tokens"], prompt_tokens[s["id"]]), (s["id"], s["input_tokens"], prompt_tokens)

    again = estimate_json(tmp_path, params)  # everything is held by the run folder now
    assert again["total"]["to_send"] == 0 and again["total"]["cached"] == again["total"]["requests"]
    assert again["total"]["cost_usd_expected"] == 0 and again["total"]["input_tokens"] == 0


def test_expected_output_tokens_are_the_means_of_earlier_records_of_the_same_cells(tmp_path, fake):
    fake.configure(tokenizer="cl100k")
    judges = [judge("rubric", fake.url, price=PRICE), judge("checker", fake.url, rubric="tip-checklist", price=PRICE)]
    params = params_for(tmp_path, fake.url, topics=12, judges=judges)
    fresh = by_stage(estimate_json(tmp_path, params))
    assert fresh["m1"]["expected_from"] == "assumed bound" and fresh["m1"]["output_tokens_expected"] == 24 * 12
    assert fresh["rubric"]["output_bound_from"] == "default"  # no max_tokens, a model LiteLLM cannot know
    assert fresh["rubric"]["output_tokens_max"] == 24 * output_bound(resolve(ModelSpec("openai/rubric", fake.url)))[0]
    assert run_stages(tmp_path, params).returncode == 0
    run_dir = tmp_path / "runs/est"
    first = {r.id for r in [*RunStore(run_dir).iter(Candidate), *RunStore(run_dir).iter(Judgment)]}

    params = params_for(tmp_path, fake.url, topics=24, judges=judges)  # 12 more scenarios: 24 more answers
    est = estimate_json(tmp_path, params)
    stages = by_stage(est)
    assert {s["expected_from"] for s in est["stages"]} == {"run folder"}
    assert stages["m1"]["to_send"] == 24 and stages["m1"]["held"] == 24
    assert stages["m1"]["output_tokens_max"] == 24 * 12  # the bound is still max_tokens
    ran = run_stages(tmp_path, params)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    completion = recorded(run_dir, "completion_tokens", skip=first)
    for s in est["stages"]:
        assert within(s["output_tokens_expected"], completion[s["id"]]), (s["id"], s, completion)
    assert within(est["total"]["output_tokens_expected"], sum(completion.values()))
    prompt_tokens = recorded(run_dir, "prompt_tokens", skip=first)
    assert within(est["total"]["input_tokens"], sum(prompt_tokens.values()))


def test_the_expected_cost_counts_the_observed_repair_turns(tmp_path, fake, monkeypatch):
    # the t1 answers are garbage to the judge: a reply that cannot be parsed, then a repair turn that fails too
    fake.configure(replies=[{"match": "about t1.", "content": "no grade from me"}])
    params = params_for(tmp_path, fake.url, topics=4, judges=[judge("rubric", fake.url, price=PRICE)])
    assert run_stages(tmp_path, params).returncode == 3  # two judgments failed
    params = params_for(tmp_path, fake.url, topics=8, judges=[judge("rubric", fake.url, price=PRICE)])
    rubric = by_stage(estimate_json(tmp_path, params))["rubric"]
    assert rubric["repair_rate"] == pytest.approx(2 / 8)  # 10 replies behind 8 first-turn requests
    n, tokens_in, tokens_out = rubric["to_send"], rubric["input_tokens"], rubric["output_tokens_expected"]
    assert n == 8 + 2  # the new answers' judgments, and the two failures asked again
    assert rubric["repairs_max"] == n
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    p_in, p_out = price_per_token(resolve(open_run(params).sweep.judges[0].spec()))
    rate = rubric["repair_rate"]
    expected = p_in * (tokens_in + rate * (tokens_in + n * REPAIR_TOKENS + tokens_out)) + p_out * tokens_out * (1 + rate)
    assert rubric["cost_usd_expected"] == pytest.approx(expected, rel=1e-6)
    bound = rubric["output_bound"]
    worst = p_in * (2 * tokens_in + n * (REPAIR_TOKENS + bound)) + p_out * 2 * n * bound
    assert rubric["cost_usd_max"] == pytest.approx(worst, rel=1e-6)


def test_batch_entries_are_priced_at_the_batch_price(tmp_path, fake, monkeypatch):
    judges = [judge("cheap", fake.url, price={**PRICE, "batch_discount": 0.4}, batch=True),
              judge("plain", fake.url, price=PRICE)]
    params = params_for(tmp_path, fake.url, judges=judges)
    data = yaml.safe_load(params.read_text())
    data["models"].append({"id": "mini", "model": "openai/gpt-4o-mini", "batch": True, "params": {"max_tokens": 50}})
    params.write_text(yaml.safe_dump(data, sort_keys=False))
    est = estimate_json(tmp_path, params)
    assert fake.stats()["requests"] == 0
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    sweep_ = open_run(params).sweep
    specs = {m.id: m.spec() for m in sweep_.models} | {j.id: j.spec() for j in sweep_.judges}
    for s in est["stages"]:
        route = resolve(specs[s["id"]])
        direct, batched = price_per_token(route, False), price_per_token(route, True)
        tokens_in, tokens_out = s["input_tokens"], s["output_tokens_expected"]  # no records: no repair rate
        assert s["cost_usd_expected_direct"] == pytest.approx(direct[0] * tokens_in + direct[1] * tokens_out)
        assert s["cost_usd_expected_batch"] == pytest.approx(batched[0] * tokens_in + batched[1] * tokens_out)
        called = s["cost_usd_expected_batch"] if s["batch"] else s["cost_usd_expected_direct"]
        assert s["cost_usd_expected"] == pytest.approx(called)
    stages = by_stage(est)
    assert stages["cheap"]["batch"] and stages["mini"]["batch"] and not stages["plain"]["batch"]
    assert stages["cheap"]["cost_usd_expected"] == pytest.approx(0.6 * stages["cheap"]["cost_usd_expected_direct"])
    mini = resolve(specs["mini"])  # LiteLLM's own batch prices (its local map), o200k_base, max_tokens the bound
    assert price_per_token(mini, True) == (pytest.approx(7.5e-08), pytest.approx(3e-07))
    assert stages["mini"]["cost_usd_expected"] < stages["mini"]["cost_usd_expected_direct"]
    assert stages["mini"]["tokenizer"] == "o200k_base" and stages["mini"]["output_tokens_max"] == 8 * 50


def test_a_budget_the_expected_cost_passes_refuses_the_sweep_before_anything_is_sent(tmp_path, fake):
    judges = [judge("rubric", fake.url, price=PRICE)]
    params = params_for(tmp_path, fake.url, judges=judges, budget_usd=0.001)
    expected = estimate_json(tmp_path, params)["total"]["cost_usd_expected"]
    assert expected > 0.001
    refused = run_stages(tmp_path, params)
    assert refused.returncode == 4, refused.stdout + refused.stderr  # the budget's exit code (docs/sweeps.md)
    assert fake.stats()["requests"] == 0
    assert "estimate (before anything is sent):" in refused.stdout  # the table came first
    err = refused.stderr
    assert f"expected to cost {dollars(expected)}" in err and "has spent $0.000000 so far" in err
    assert "more than limits.budget_usd = $0.001000" in err and "nothing was sent" in err
    assert f"Raise limits.budget_usd in {params} to at least {dollars(needed_budget(0, expected))}" in err
    run_dir = tmp_path / "runs/est"
    assert not RunStore(run_dir).read(Candidate) and not RunStore(run_dir).read(Judgment)

    # spent so far counts: a finished sweep, then more scenarios under a budget between the two
    first = params_for(tmp_path, fake.url, judges=judges)
    assert run_stages(tmp_path, first).returncode == 0
    spent = recorded_spend(run_dir).usd
    more = params_for(tmp_path, fake.url, topics=8, judges=judges)
    rest = estimate_json(tmp_path, more)["total"]["cost_usd_expected"]
    sent = fake.stats()["requests"]
    tight = params_for(tmp_path, fake.url, topics=8, judges=judges, budget_usd=round(spent + rest / 2, 6))
    refused = run_stages(tmp_path, tight)
    assert refused.returncode == 4 and fake.stats()["requests"] == sent
    assert f"has spent {dollars(spent)} so far" in refused.stderr
    assert f"to at least {dollars(needed_budget(spent, rest))}" in refused.stderr
    raised = params_for(tmp_path, fake.url, topics=8, judges=judges, budget_usd=10 * needed_budget(spent, rest))
    ran = run_stages(tmp_path, raised)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "budget: limits.budget_usd = " in ran.stdout
    assert fake.stats()["requests"] - sent == 8 + 8


def test_a_budget_with_a_model_of_unknown_price_refuses_naming_it(tmp_path, fake):
    params = params_for(tmp_path, fake.url, price=None, judges=[judge("rubric", fake.url, price=PRICE)],
                        budget_usd=100)
    refused = run_stages(tmp_path, params)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert fake.stats()["requests"] == 0
    assert "the price of models[0] (id m1, openai/m1) is unknown" in refused.stderr
    assert "price: {input_per_mtok: …, output_per_mtok: …}" in refused.stderr and "rubric" not in refused.stderr
    shown = command(tmp_path, "estimate", str(params))  # without --json: the table says which entry needs a price
    assert shown.returncode == 0, shown.stderr
    assert "? price unknown: set price: {input_per_mtok: …, output_per_mtok: …}" in shown.stdout
    assert "models[0] (m1: openai/m1)" in shown.stdout
    est = by_stage(estimate_json(tmp_path, params))
    assert est["m1"]["cost_usd_expected"] is None and not est["m1"]["price_known"]
    assert est["rubric"]["cost_usd_expected"] is not None


@pytest.mark.parametrize("budget", [0, -5])
def test_a_budget_that_is_not_positive_is_refused_naming_the_key(tmp_path, fake, budget):
    params = params_for(tmp_path, fake.url, budget_usd=budget)
    out = command(tmp_path, "estimate", str(params))
    assert out.returncode == 2
    assert f"{params}: limits.budget_usd: Input should be greater than 0 (got {budget})" in out.stderr


def test_packed_calls_are_counted_as_grading_packs_them(tmp_path, fake):
    packed = [judge("packed", fake.url, pack_size=3, price=PRICE)]
    params = params_for(tmp_path, fake.url, topics=2, judges=None)
    assert run_stages(tmp_path, params).returncode == 0  # 4 answers, no judge yet
    params = params_for(tmp_path, fake.url, topics=4, judges=packed)
    est = by_stage(estimate_json(tmp_path, params))
    # the 4 answers collected earlier are packed by the judge stage, the 4 new ones as they arrive: 2 + 2 calls
    assert est["packed"]["requests"] == 4 and est["packed"]["unknown"] == 2
    sent = fake.stats()["by_model"].get("packed", 0)
    assert run_stages(tmp_path, params).returncode == 0
    assert fake.stats()["by_model"]["packed"] - sent == 4

    # another judge (nothing of it cached) in a new run folder
    other = params_for(tmp_path, fake.url, topics=4, judges=[judge("packed2", fake.url, pack_size=3, price=PRICE)],
                       name="cells")
    assert by_stage(estimate_json(tmp_path, other))["packed2"]["to_send"] == 3  # one execution: 8 answers, 3 calls
    ran = run_planned(tmp_path, other, per_cell=True)  # one execution per cell packs its own 4: 2 calls each
    assert ran.returncode == 0, ran.log
    row = next(line.split() for line in ran.stdout.splitlines() if line.startswith("judge ") and " packed2 " in line)
    assert row[6] == "4" and fake.stats()["by_model"]["packed2"] == 4  # to send, as printed; as sent


def test_a_grid_rerun_under_another_name_is_estimated_from_the_cache(tmp_path, fake):
    params = params_for(tmp_path, fake.url, judges=[judge("rubric", fake.url, price=PRICE)])
    assert run_stages(tmp_path, params).returncode == 0
    est = estimate_json(tmp_path, params, "--run-dir", str(tmp_path / "runs/copy"))
    # the answers are in the response cache, so the judge requests of those very answers are looked up too
    assert est["total"]["to_send"] == 0 and est["total"]["cache_hits"] == 16 and est["total"]["unknown"] == 0


def test_prompt_tokens_are_counted_as_litellm_counts_them_and_never_downloaded():
    from bench.models._litellm import litellm  # the project's LiteLLM, quiet and with its local price map

    lm = litellm()
    messages = [{"role": "system", "content": "You grade answers. Reply with JSON only."},
                {"role": "user", "content": "Question: One tip about sleep?\n\nAnswer: Keep a fixed bedtime, even on "
                                            "weekends; 7–9 hours. <|endoftext|> {\"score\": 3}"}]
    self_hosted = counter_for(resolve(ModelSpec("openai/m1", api_base="http://127.0.0.1:9/v1")))
    assert self_hosted.tokenizer == "cl100k_base" and self_hosted.note is None
    assert self_hosted.messages(messages) == lm.token_counter(model="m1", messages=messages)
    mini = counter_for(resolve(ModelSpec("openai/gpt-4o-mini")))
    assert mini.tokenizer == "o200k_base"
    assert mini.messages(messages) == lm.token_counter(model="gpt-4o-mini", messages=messages)
    llama = counter_for(resolve(ModelSpec("groq/llama-3.1-8b-instant")))  # LiteLLM would fetch it from the Hub
    assert llama.tokenizer == "cl100k_base" and "not bundled" in (llama.note or "")
    assert llama.messages(messages) == self_hosted.messages(messages)


@pytest.mark.local_model  # the cache key of local/<name> names its weights' package
def test_estimating_starts_no_embedded_model(tmp_path, fake):
    params = params_for(tmp_path, fake.url)
    data = yaml.safe_load(params.read_text())
    data["models"].append({"id": "gemma", "model": "local/gemma-3-270m"})
    params.write_text(yaml.safe_dump(data, sort_keys=False))
    # starting (or reaching) the embedded model would ask this address, where nothing listens, and fail
    out = command(tmp_path, "estimate", str(params), "--json", BENCH_LOCAL_API_BASE="http://127.0.0.1:9/v1")
    assert out.returncode == 0, out.stdout + out.stderr
    est = by_stage(json.loads(out.stdout))
    assert est["gemma"]["to_send"] == 8 and est["gemma"]["cost_usd_expected"] == 0.0  # the embedded model: free
    assert fake.stats()["requests"] == 0
