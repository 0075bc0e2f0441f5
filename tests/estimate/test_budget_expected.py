"""A budget that the expected cost fits is not refused; a pilot measures replies nothing has observed yet.

Against the loopback fake provider with declared prices (its usage counts words as tokens; the estimate
counts prompts with cl100k, a few tokens more): each answer's ``max_tokens`` (100) is far above what the
fake answers (3 words, or the canned reply set here), so the worst case passes the budget while the
expected cost fits it. Before, the pre-start check assumed every reply takes its whole ``max_tokens``
when no record of the same cell said otherwise, and refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from bench.core.records import Candidate, Judgment
from bench.core.spend import recorded_spend
from bench.core.store import RunStore
from bench.models.budget import dollars
from bench.testing import grids
from bench.testing.in_process import command, run_stages

PRICE = {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}  # $0.001 per (fake) token
JUDGE_PRICE = {"input_per_mtok": 10.0, "output_per_mtok": 10.0}
LONG = " ".join(["word"] * 90)  # a 90-token answer: within max_tokens 100, thirty times the fake's usual one
TIP = grids.prompt("p", "One tip about {topic}.")
OTHER = grids.prompt("q", "Give one tip about {topic}.")


def write(path: Path, url: str, topics: int, budget: float | None, *, prompts: list | None = None,
          judges: list | None = None, **limits) -> Path:
    model = grids.model("m1", url, name="fake-1", price=PRICE, params={"max_tokens": 100})
    extra = {} if budget is None else {"budget_usd": budget}
    return grids.grid(path, url, name="b", topics=topics, models=[model], prompts=prompts or [TIP], judges=judges,
                      limits={"max_concurrency": 4, "timeout_s": 10, "retries": 0, **extra, **limits})


def estimate(tmp_path: Path, params: Path, *args: str) -> dict:
    out = command(tmp_path, "estimate", str(params), "--json", *args)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def stage(est: dict, sid: str) -> dict:
    return next(s for s in est["stages"] if s["id"] == sid)


def answers(run_dir: Path) -> int:
    return len(RunStore(run_dir).done_ids(Candidate))


def test_a_new_cell_of_a_model_already_observed_is_expected_at_its_observed_length_and_runs(tmp_path, fake):
    run_dir = tmp_path / "runs" / "b"
    params = write(tmp_path / "b.yaml", fake.url, topics=4, budget=None)
    first = run_stages(tmp_path, params)
    assert first.returncode == 0, first.stdout + first.stderr
    assert recorded_spend(run_dir).usd == pytest.approx(4 * 7 * 0.001)  # 4 prompt + 3 answer tokens each

    # a new prompt on the same model and params, 8 more scenarios: 20 answers to send, none of cell q observed
    params = write(params, fake.url, topics=12, budget=0.6, prompts=[TIP, OTHER])
    est = estimate(tmp_path, params)
    m1 = stage(est, "m1")
    assert m1["to_send"] == 20 and m1["expected_from"] == "run folder"
    assert m1["output_tokens_expected"] == 20 * 3 and m1["output_tokens_max"] == 20 * 100
    assert m1["cost_usd_expected"] == pytest.approx((m1["input_tokens"] + 20 * 3) * 0.001)
    budget = est["budget"]
    assert budget["outcome"] == "expected" and budget["spent_usd"] == pytest.approx(0.028)
    assert budget["worst_usd"] == pytest.approx(m1["cost_usd_max"]) and budget["spent_usd"] + budget["worst_usd"] > 0.6

    before = int(fake.stats()["requests"])
    ran = run_stages(tmp_path, params)
    log = ran.stdout + ran.stderr
    assert ran.returncode == 0, log  # before: refused (exit 4), cell q assumed at max_tokens ($1.36 for 12 answers)
    assert "the sweep stops at the budget if the replies run longer than expected" in log, log
    assert answers(run_dir) == 24 and int(fake.stats()["requests"]) - before == 20
    assert recorded_spend(run_dir).usd <= 0.6


def test_replies_the_response_cache_holds_for_the_grid_say_how_long_the_rest_run(tmp_path, fake):
    params = write(tmp_path / "b.yaml", fake.url, topics=4, budget=None)
    assert run_stages(tmp_path, params).returncode == 0
    params = write(params, fake.url, topics=12, budget=0.2)
    copy = tmp_path / "runs" / "copy"
    est = estimate(tmp_path, params, "--run-dir", str(copy))
    m1 = stage(est, "m1")
    assert m1["cache_hits"] == 4 and m1["to_send"] == 8 and m1["expected_from"] == "response cache"
    assert m1["output_tokens_expected"] == 8 * 3 and est["budget"]["outcome"] == "expected"
    shown = command(tmp_path, "estimate", str(params), "--run-dir", str(copy))
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if line.startswith("collect "))
    assert "response cache" in row and dollars(m1["cost_usd_max"]) in row, shown.stdout  # the worst case …
    assert dollars(m1["cost_usd_expected"]) in row  # … and the expected cost
    assert m1["cost_usd_max"] > 0.2 >= m1["cost_usd_expected"]

    before = int(fake.stats()["requests"])
    ran = run_stages(tmp_path, params, run_dir=str(copy))
    assert ran.returncode == 0, ran.stdout + ran.stderr  # before: refused, the 8 new answers assumed at max_tokens
    assert answers(copy) == 12 and int(fake.stats()["requests"]) - before == 8


def test_with_nothing_observed_a_pilot_measures_the_replies_and_the_rest_runs(tmp_path, fake):
    judges = [grids.judge("grader", fake.url, name="fake-judge", price=JUDGE_PRICE)]
    params = write(tmp_path / "b.yaml", fake.url, topics=12, budget=0.5, judges=judges)
    est = estimate(tmp_path, params)
    assert fake.stats()["requests"] == 0
    assert {s["expected_from"] for s in est["stages"]} == {"pilot pending"}
    assert est["budget"]["outcome"] == "pilot" and est["budget"]["pilot"] == ["collect m1", "judge grader"]
    assert est["total"]["cost_usd_expected"] > 0.5 >= est["budget"]["floor_usd"]
    shown = command(tmp_path, "estimate", str(params))
    assert "pilot pending" in shown.stdout and "a sweep first sends a pilot" in shown.stdout, shown.stdout

    ran = run_stages(tmp_path, params)
    log = ran.stdout + ran.stderr
    assert ran.returncode == 0, log  # before: refused (exit 4), nothing sent
    assert "pilot: sending the first 5 answers per model to measure (collect m1, judge grader)" in log, log
    assert "estimate after the pilot (10 model calls, $0." in log, log  # 5 answers and their 5 grades
    assert log.index("estimate after the pilot") < log.index("collect: 12 planned")  # before the rest is collected
    run_dir = tmp_path / "runs" / "b"
    assert answers(run_dir) == 12 and len(RunStore(run_dir).done_ids(Judgment)) == 12
    assert fake.stats()["by_model"] == {"fake-1": 12, "fake-judge": 12}  # the pilot's items were not asked again
    assert recorded_spend(run_dir).usd <= 0.5


def test_a_pilot_whose_replies_show_the_rest_cannot_fit_stops_with_exit_4_and_keeps_its_records(tmp_path, fake):
    fake.configure(replies=[{"match": "One tip", "content": LONG}])
    params = write(tmp_path / "b.yaml", fake.url, topics=12, budget=0.6)
    ran = run_stages(tmp_path, params)
    log = ran.stdout + ran.stderr
    assert ran.returncode == 4, log
    run_dir = tmp_path / "runs" / "b"
    assert answers(run_dir) == 5 and fake.stats()["requests"] == 5  # the pilot, and nothing else
    spent = recorded_spend(run_dir).usd
    assert spent == pytest.approx(5 * 94 * 0.001) and spent <= 0.6
    assert re.search(r"after the pilot \(5 model calls, \$0\.4700 spent\), the rest of this sweep is expected to "
                     r"cost \$0\.7\d+ \(at most \$0\.7\d+\), .* is more than limits\.budget_usd = \$0\.6000", log), log
    assert "the pilot's records are kept" in log and f"Raise limits.budget_usd in {params}" in log, log
    assert "collect: 1 execution(s)" not in log  # nothing else started
    assert (run_dir / "scenarios.jsonl").read_text().count("\n") == 12  # the grid's, not the pilot's five

    shown = estimate(tmp_path, params)  # the pilot's records are the evidence now
    assert stage(shown, "m1")["expected_from"] == "run folder" and stage(shown, "m1")["to_send"] == 7

    data = yaml.safe_load(params.read_text())
    data["limits"]["budget_usd"] = 5.0
    params.write_text(yaml.safe_dump(data, sort_keys=False))
    rest = run_stages(tmp_path, params)
    assert rest.returncode == 0, rest.stdout + rest.stderr
    assert "pilot:" not in rest.stdout and answers(run_dir) == 12 and fake.stats()["requests"] == 12


def test_without_a_pilot_a_fresh_grid_is_held_at_its_output_bound(tmp_path, fake):
    params = write(tmp_path / "b.yaml", fake.url, topics=12, budget=0.5, pilot=0)
    est = estimate(tmp_path, params)
    assert stage(est, "m1")["expected_from"] == "assumed bound" and est["budget"]["outcome"] == "refused"
    refused = run_stages(tmp_path, params)
    assert refused.returncode == 4, refused.stdout + refused.stderr
    expected = dollars(est["total"]["cost_usd_expected"])
    assert f"expected to cost {expected} (at most {expected}; collect m1 at the output bound, as no reply of theirs " \
           f"was observed and no pilot is sent (limits.pilot = 0" in refused.stderr
    assert fake.stats()["requests"] == 0


def test_prompts_that_alone_pass_the_budget_are_refused_without_a_pilot(tmp_path, fake):
    params = write(tmp_path / "b.yaml", fake.url, topics=12, budget=0.04)  # prompts: 12 x 13 tokens = $0.156
    floor = estimate(tmp_path, params)["budget"]["floor_usd"]
    assert floor == pytest.approx(0.156)
    refused = run_stages(tmp_path, params)
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert f"even if collect m1 replied nothing, {dollars(floor)} (its prompts alone) is more than limits.budget_usd = $0.0400" in refused.stderr
    assert "nothing was sent (no pilot either)" in refused.stderr and fake.stats()["requests"] == 0


@pytest.mark.parametrize("value, said", [(-1, "Input should be greater than or equal to 0"),
                                         (True, "Input should be a valid integer"),
                                         ("5", "Input should be a valid integer")])
def test_limits_pilot_is_a_whole_number_of_answers(tmp_path, fake, value, said):
    params = write(tmp_path / "b.yaml", fake.url, topics=2, budget=1.0, pilot=value)
    out = command(tmp_path, "estimate", str(params))
    assert out.returncode == 2 and f"limits.pilot: {said}" in out.stderr, out.stderr


def test_a_floor_refusal_says_what_its_floor_holds_the_judges_stand_in_answers_too(tmp_path, fake):
    """The floor of a refusal before a pilot holds the judges' prompts, which grade stand-in answers of the
    assumed length: "even with every reply empty" was not true of it (an empty answer is a shorter prompt)."""
    judges = [grids.judge("grader", fake.url, name="fake-judge", price=PRICE)]
    params = write(tmp_path / "b.yaml", fake.url, topics=12, budget=0.04, judges=judges)
    floor = estimate(tmp_path, params)["budget"]["floor_usd"]
    refused = run_stages(tmp_path, params)
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert "every reply empty" not in refused.stderr
    assert (f"even if collect m1, judge grader replied nothing, {dollars(floor)} (their prompts alone, the judges' "
            f"holding stand-in answers of the length assumed for them) is more than limits.budget_usd = $0.0400"
            in refused.stderr), refused.stderr
    assert fake.stats()["requests"] == 0
