"""The bias audit (issue 33, point 3): each measure recovers a bias the fake provider put in at a known rate, within
its interval, and the same judges without the bias get intervals covering the unbiased values; on hand-made tables
each statistic is the hand-computed one; a measure that cannot apply says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.stats import spearmanr

from bench.analysis import audit_table, judge_audit, load_run, model_family
from bench.analysis.audit_verdicts import verdict
from bench.analysis.bias_estimates import Estimate, spearman
from bench.analysis.judge_audit import MEASURES, _levels
from bench.analysis.tables import CANDIDATE_SCHEMA, JUDGMENT_SCHEMA, SCORE_SCHEMA, RunTables
from bench.testing.fake_provider import FakeProvider
from bench.testing.grids import generate, grid, judge, model, prompt
from bench.testing.in_process import run_stages

P_FIRST = 0.3  # gemma-first's position bias
BONUS = 1  # gpt-judge's favour of gpt-cand's answers, in levels of every criterion (so of the composite)
BONUS_LENGTH = 1  # claude-judge's bonus, in levels of every criterion, on answers over 95 characters
QUALITY = {"gpt-cand": 0.35, "mistral-cand": 0.35, "phi-strong": 1.0}  # two alike, one far better (decisive pairs)
BIASES = {"favour_model": {"gpt-judge": {"model": "gpt-cand", "bonus": BONUS}},
          "length_bias": {"claude-judge": {"over_chars": 95, "bonus": BONUS_LENGTH}, "llama-long": {"over_chars": 95, "bonus": 2}},
          "position_bias": {"gemma-first": P_FIRST}}


def _sweep(tmp: Path, biased: bool) -> RunTables:
    """Run the audit grid on a fake provider of its own, with or without the scripted biases; return its tables."""
    config = {"model_quality": QUALITY, "pad_answers": {m: 30 for m in QUALITY}, **(BIASES if biased else {})}
    with FakeProvider(**config) as fake:
        url = fake.url
        params = grid(tmp / "audit.yaml", url, name="audit", seed=3,
                      models=[model("x", url, name="gpt-cand"), model("y", url, name="mistral-cand"),
                              model("s", url, name="phi-strong")],
                      prompts=[prompt("tip", "One tip about {topic}.")],
                      scenarios=generate(topic=[f"topic {i}" for i in range(40)]),
                      judges=[judge("gpt-judge", url), judge("mistral-judge", url), judge("claude-judge", url),
                              judge("gemma-first", url, rubric="arena-pairwise", baseline="s/tip@v1"),
                              judge("llama-long", url, rubric="arena-pairwise", baseline="y/tip@v1")],
                      limits={"max_concurrency": 16, "timeout_s": 20, "retries": 2})
        out = run_stages(tmp, params, drop=("BENCH_CACHE",))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return load_run(tmp / "runs" / "audit")


@pytest.fixture(scope="module")
def audited_runs(tmp_path_factory):
    """The tables of the grid run with the biases and without them (one after the other: in-process runs share
    the process's environment)."""
    return [_sweep(tmp_path_factory.mktemp(name), biased) for name, biased in (("biased", True), ("unbiased", False))]


@pytest.fixture(scope="module")
def audits(audited_runs):
    """The audit of the biased run and of the unbiased one."""
    return [judge_audit(t, resamples=500, seed=0) for t in audited_runs]


def _covers(found: dict, value: float) -> bool:
    return found["state"] == "ok" and found["ci_low"] <= value <= found["ci_high"]


def test_position_bias_is_recovered_at_its_injected_rate(audits):
    biased, unbiased = audits
    # the better answer wins every unbiased verdict: the weaker one, shown first in half the verdicts, wins there
    # with probability p, so the first slot wins (1 + p) / 2 of decisive verdicts and a pair flips with probability p
    assert _covers(biased["gemma-first"]["first_slot_preference"], (1 + P_FIRST) / 2)
    assert _covers(biased["gemma-first"]["flip_rate"], P_FIRST)
    assert biased["gemma-first"]["first_slot_preference"]["ci_low"] > 0.5
    assert biased["gemma-first"]["first_slot_preference"]["verdict"].startswith("prefers the answer shown first")
    assert _covers(unbiased["gemma-first"]["first_slot_preference"], 0.5)
    assert _covers(unbiased["gemma-first"]["flip_rate"], 0.0)
    assert unbiased["gemma-first"]["first_slot_preference"]["verdict"].startswith("no net preference for either "
                                                                                   "seat; flips ")
    assert _covers(biased["llama-long"]["first_slot_preference"], 0.5), "a length bias is not a position bias"


def test_length_bias_shows_in_the_score_correlation_and_the_style_coefficient(audits):
    biased, unbiased = audits
    assert biased["claude-judge"]["length_correlation"]["ci_low"] > 0
    assert biased["claude-judge"]["length_correlation"]["verdict"].startswith("scores rise with answer length")
    assert biased["llama-long"]["style_length_coefficient"]["ci_low"] > 0
    assert biased["llama-long"]["style_length_coefficient"]["verdict"].startswith("favours the longer answer")
    for judge_id in ("claude-judge", "gpt-judge", "mistral-judge"):
        assert _covers(unbiased[judge_id]["length_correlation"], 0.0), judge_id
    assert _covers(biased["gpt-judge"]["length_correlation"], 0.0), "only claude-judge was made to like length"
    assert _covers(unbiased["llama-long"]["style_length_coefficient"], 0.0)


def test_length_gap_recovers_the_injected_bonus_against_the_rest_of_the_jury(audits, audited_runs):
    # claude-judge adds one level to every criterion of an answer over 95 characters (short of the scale's top):
    # the bonus each answer got is its composite in the biased run minus the same judge's in the unbiased one (the
    # same requests, the same replies but for the bias). Against the other judges, the audit must find the mean
    # bonus of the answers longer than the median length less that of the rest, knowing neither bonus nor 95
    biased, unbiased = audits
    found = biased["claude-judge"]["length_gap"]
    got = [t.scores.filter((pl.col("judge") == "claude-judge") & (pl.col("criterion") == "composite"))
           .group_by("candidate").agg(pl.col("value").mean())
           .join(t.candidates.select(pl.col("id").alias("candidate"), "cell", "scenario", "sample",
                                     pl.col("output").str.len_chars()), on="candidate")
           .drop("candidate") for t in audited_runs]  # answer ids differ between runs: matched by what they answer
    bonus = got[0].join(got[1].drop("output"), on=["cell", "scenario", "sample"], suffix="_unbiased")
    assert bonus.height == got[0].height == got[1].height, "both runs graded the same answers"
    bonus = bonus.with_columns((pl.col("value") - pl.col("value_unbiased")).alias("bonus"))
    median = bonus["output"].median()
    expected = (bonus.filter(pl.col("output") > median)["bonus"].mean()
                - bonus.filter(pl.col("output") <= median)["bonus"].mean())
    assert expected > 0.3, "the padding must put answers on both sides of 95 characters"
    assert bonus.filter(pl.col("output") <= 95)["bonus"].abs().max() == 0, "no bonus under 95 characters"
    assert _covers(found, expected) and found["ci_low"] > 0, (found, expected)
    assert found["verdict"].startswith("gives longer answers more than the other judges do")
    for judge_id in ("gpt-judge", "mistral-judge"):  # the others' gaps hold claude-judge's bonus against them
        assert biased[judge_id]["length_gap"]["ci_high"] < 0, biased[judge_id]["length_gap"]
        assert _covers(unbiased[judge_id]["length_gap"], 0.0), judge_id
    assert _covers(unbiased["claude-judge"]["length_gap"], 0.0)
    assert unbiased["claude-judge"]["length_gap"]["verdict"].startswith("no length bias against the jury shown")
    assert biased["gemma-first"]["length_gap"]["state"] == "not_applicable"


def test_self_preference_recovers_the_injected_bonus_against_the_other_families(audits):
    biased, unbiased = audits
    found = biased["gpt-judge"]["self_preference"]
    assert _covers(found, BONUS) and found["ci_low"] > 0, found
    assert found["verdict"].startswith("prefers its own family's answers") and "(gpt)" in found["verdict"]
    assert _covers(unbiased["gpt-judge"]["self_preference"], 0.0)
    assert _covers(unbiased["mistral-judge"]["self_preference"], 0.0)
    # gpt-judge's favour of gpt-cand must not show up as mistral-judge's own bias: it is never mistral-judge's
    # reference on gpt answers (only judges of a third family are)
    assert _covers(biased["mistral-judge"]["self_preference"], 0.0), biased["mistral-judge"]["self_preference"]
    assert biased["gpt-judge"]["jury_disagreement"]["value"] > unbiased["gpt-judge"]["jury_disagreement"]["ci_high"]


def test_a_measure_that_cannot_apply_says_why(audits):
    biased, _ = audits
    claude, gemma = biased["claude-judge"], biased["gemma-first"]
    assert claude["first_slot_preference"]["state"] == claude["style_length_coefficient"]["state"] == "not_applicable"
    assert claude["self_preference"]["state"] == "not_applicable"
    assert "no answer of its own family (claude)" in claude["self_preference"]["verdict"]
    assert gemma["length_correlation"]["state"] == gemma["self_preference"]["state"] == "not_applicable"
    assert gemma["jury_disagreement"]["state"] == "not_applicable", "the two pairwise judges share no pair"
    for found in (claude, gemma):
        for m in MEASURES:
            assert found[m]["verdict"], m
            if found[m]["state"] != "ok":
                assert found[m]["value"] is None and found[m]["verdict"].startswith(("not applicable: ",
                                                                                     "not enough data: "))


def test_the_audit_table_has_one_row_per_judge_and_measure(audits):
    table = audit_table(audits[0])
    assert table.height == 5 * len(MEASURES)
    assert set(table["state"]) == {"ok", "not_applicable"}
    assert table.filter(pl.col("state") == "ok")["value"].null_count() == 0


# -- hand-made tables ---------------------------------------------------------------------------------------------
def _frame(rows: list[dict], schema: dict) -> pl.DataFrame:
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema)


def _tables(scores: list[dict], judgments: list[dict] = (), outputs: dict[str, str] | None = None, *,
            rubric: str = "r@1", criterion: str = "q", run_dir: Path = Path(".")) -> RunTables:
    """Return tables of ``run_dir`` holding ``scores`` (judge, candidate, value on ``criterion`` of ``rubric``; the
    composite the same), the judgments they imply plus ``judgments``, and candidates with ``outputs``."""
    rows, judged = [], []
    for s in scores:
        jid = f"{s['judge']}:{s['candidate']}"
        base = {"judge": s["judge"], "judge_model": s.get("judge_model", f"openai/{s['judge']}"), "rubric": rubric,
                "mode": "rubric", "candidate": s["candidate"], "judgment": jid}
        rows += [{**base, "criterion": criterion, "value": float(s["value"])},
                 {**base, "criterion": "composite", "value": float(s["value"])}]
        judged.append({**base, "id": jid, "score": float(s["value"])})
    cands = ({s["candidate"] for s in scores} | {j[k] for j in judgments for k in ("candidate", "candidate_b")}
             | set(outputs or {}))
    candidates = [{"id": c, "model": c.split("-")[0], "output": (outputs or {}).get(c, "x")} for c in sorted(cands)]
    return RunTables(run_dir, _frame(candidates, CANDIDATE_SCHEMA), _frame(judged + list(judgments), JUDGMENT_SCHEMA),
                     _frame(rows, SCORE_SCHEMA), pl.DataFrame(), {})


def test_collapse_and_jury_disagreement_are_the_hand_computed_values():
    values = {"flat": [3] * 16 + [4] * 4, "a": [1, 2, 3, 4, 5] * 4, "b": [1, 2, 3, 4, 5] * 4}
    t = _tables([{"judge": j, "candidate": f"c{i}", "value": v} for j, vs in values.items() for i, v in enumerate(vs)])
    audit = judge_audit(t, resamples=200)
    flat = audit["flat"]
    assert flat["modal_share"]["value"] == pytest.approx(0.8)
    p = np.array([0.8, 0.2])
    assert flat["entropy"]["value"] == pytest.approx(-(p * np.log(p)).sum() / np.log(5))  # levels 1-5 used in the run
    assert audit["a"]["entropy"]["value"] == pytest.approx(1.0) and audit["a"]["modal_share"]["value"] == 0.2
    span = 4  # no rubric snapshot: the composites the rubric's judges gave span 1 to 5
    expected = np.mean([abs(f - o) for f, o in zip(values["flat"], values["a"])])  # a and b agree: their median
    assert flat["jury_disagreement"]["value"] == pytest.approx(expected / span)
    assert audit["a"]["jury_disagreement"]["value"] == pytest.approx(
        np.mean([abs(x - np.median([f, x])) for f, x in zip(values["flat"], values["a"])]) / span)
    assert f"differs from the median of the other judges by {100 * expected / span:.0f}% of the scale" in \
        flat["jury_disagreement"]["verdict"] and "over 20 answers" in flat["jury_disagreement"]["verdict"]
    assert flat["modal_share"]["ci_low"] <= 0.8 <= flat["modal_share"]["ci_high"]
    assert flat["modal_share"]["verdict"].startswith("gives its most common grade 80% of the time")


def test_position_measures_count_the_seat_shown_not_the_stored_side():
    rows = []
    for i in range(12):  # each pair asked in both orders; the judge always picks whichever answer it was shown first
        for order, verdict in (("AB", "A>B"), ("BA", "B>A")):  # stored in the original order: BA's first is B
            rows.append({"id": f"j{i}{order}", "judge": "seat", "judge_model": "openai/seat", "mode": "pairwise",
                         "rubric": "p@1", "candidate": f"a{i}", "candidate_b": f"b{i}", "cell": "a", "cell_b": "b",
                         "scenario": f"s{i}", "sample": 0, "order": order, "verdict": verdict, "repeat": 0})
    found = judge_audit(_tables([], rows), resamples=200)["seat"]
    assert found["first_slot_preference"]["value"] == 1.0 and found["first_slot_preference"]["n"] == 24
    assert found["flip_rate"]["value"] == 1.0 and found["flip_rate"]["n"] == 12
    assert found["self_preference"]["state"] == "not_applicable"


def test_self_preference_needs_two_families_and_too_few_answers_is_a_state():
    one_family = [{"judge": j, "candidate": f"gpt-{i}", "value": 3} for j in ("gpt-a", "gpt-b") for i in range(12)]
    found = judge_audit(_tables(one_family), resamples=100)["gpt-a"]["self_preference"]
    assert found["state"] == "not_applicable" and "a jury of two families or more" in found["verdict"]
    few = [{"judge": j, "candidate": f"c{i}", "value": i % 5 + 1} for j in ("gpt-a", "claude-b") for i in range(4)]
    found = judge_audit(_tables(few), resamples=100)["gpt-a"]
    assert found["length_correlation"]["state"] == "not_enough_data"
    assert found["jury_disagreement"]["state"] == "not_enough_data"
    alone = judge_audit(_tables([{"judge": "solo", "candidate": f"c{i}", "value": 3} for i in range(12)]))
    assert alone["solo"]["jury_disagreement"]["state"] == "not_applicable"


def _family_jury(judges: dict[str, str], own_bonus: dict[str, float]) -> RunTables:
    """Return tables of ``judges`` (id -> LiteLLM model) grading 20 gpt and 20 claude answers of varied quality on
    1-5, each judge adding ``own_bonus[id]`` to its own family's answers (the additive model the measure assumes)."""
    quality = [1 + (i * 7) % 3 for i in range(20)]  # 1..3, so a +1 bonus stays on the scale
    scores = [{"judge": j, "judge_model": m, "candidate": f"{fam}-{i}",
               "value": q + (own_bonus.get(j, 0) if model_family(m) == fam else 0) + (i % 2 if j == "gpt-j" else 0)}
              for j, m in judges.items() for fam in ("gpt", "claude") for i, q in enumerate(quality)]
    return _tables(scores)


def test_self_preference_does_not_blame_a_judge_for_another_judges_bias():
    """Only the claude judge favours its own family. In a two-family jury no judge is neutral on the other family's
    answers: both are not applicable (the old measure gave both +1.00). With a judge of a third family, the gpt
    judge is clear (its interval covers 0) and the claude judge's +1 is recovered."""
    two = {"gpt-j": "openai/gpt-4o-mini", "claude-j": "anthropic/claude-3-5-haiku"}
    audit = judge_audit(_family_jury(two, {"claude-j": 1}), resamples=300)
    for judge_id in two:
        found = audit[judge_id]["self_preference"]
        assert found["state"] == "not_applicable" and "needs a judge of a third family" in found["verdict"], found
    three = {**two, "mistral-j": "mistral/mistral-small"}
    audit = judge_audit(_family_jury(three, {"claude-j": 1}), resamples=300)
    assert _covers(audit["gpt-j"]["self_preference"], 0.0), audit["gpt-j"]["self_preference"]
    assert audit["gpt-j"]["self_preference"]["verdict"].startswith("no self-preference shown")
    claude = audit["claude-j"]["self_preference"]
    assert claude["value"] == pytest.approx(1.0) and _covers(claude, 1.0) and claude["ci_low"] > 0
    assert claude["verdict"].startswith("prefers its own family's answers") and "(claude)" in claude["verdict"]


def test_verdicts_name_the_seat_their_number_belongs_to_and_read_the_interval():
    second = verdict("first_slot_preference", Estimate(0.35, 0.25, 0.45, 100))
    assert second.startswith("prefers the answer shown second: the answer shown first wins 35% of 100 decisive")
    first = verdict("first_slot_preference", Estimate(0.7, 0.6, 0.8, 100))
    assert first.startswith("prefers the answer shown first: the answer shown first wins 70%")
    wide = verdict("flip_rate", Estimate(0.12, 0.08, 0.16, 200))
    assert "possibly over 10%" in wide and "is a lot" not in wide
    assert "is a lot" in verdict("flip_rate", Estimate(0.2, 0.15, 0.25, 200))
    loose = verdict("entropy", Estimate(0.275, 0.0, 0.51, 40))  # the point is under 50%, the interval is not
    assert "possibly under 50%" in loose and "collapse" in loose
    pairwise = verdict("modal_share", Estimate(0.79, 0.7, 0.86, 80), pairwise=True)
    assert "one side is much stronger or the judge does not discriminate" in pairwise
    assert "grade pairwise" not in pairwise and pairwise.startswith("gives its most common verdict 79%")
    scoring = verdict("modal_share", Estimate(0.79, 0.7, 0.86, 80))
    assert "reviewers' own spread" in scoring
    assert "over 40 pairs" in verdict("jury_disagreement", Estimate(0.3, 0.27, 0.33, 40, unit="pairs"), pairwise=True)


def test_entropy_counts_the_levels_of_the_rubrics_declared_scale():
    grades = pl.Series(["3.0", "4.0", "4.0"])
    assert _levels(grades, False) == ["3.0", "4.0"]  # no rubric snapshot: the range used
    assert _levels(grades, False, (1.0, 5.0)) == ["1.0", "2.0", "3.0", "4.0", "5.0"]
    assert _levels(pl.Series(["0.0", "7.0"]), False, (1.0, 5.0))[-1] == "7.0"  # a grade outside widens it


def test_entropy_of_a_run_reads_its_rubric_snapshot(tmp_path):
    """A judge giving only 3 and 4 (80/20) on tip-v1's 1-5 scale spreads over log(5), not over the two levels it
    used: read against two levels, the collapse the measure exists for would look like a healthy 72%."""
    snapshot = tmp_path / "rubrics" / "h" / "tip-v1.md"
    snapshot.parent.mkdir(parents=True)
    snapshot.write_text((Path(__file__).parents[2] / "rubrics" / "tip-v1.md").read_text())
    flat = [{"judge": "flat", "candidate": f"c{i}", "value": 3 if i < 16 else 4} for i in range(20)]
    p = np.array([0.8, 0.2])
    found = judge_audit(_tables(flat, rubric="tip-v1@1", criterion="relevance", run_dir=tmp_path),
                        resamples=200)["flat"]["entropy"]
    assert found["value"] == pytest.approx(-(p * np.log(p)).sum() / np.log(5))
    assert "collapse" in found["verdict"]
    bare = judge_audit(_tables(flat, rubric="tip-v1@1", criterion="relevance", run_dir=tmp_path / "none"),
                       resamples=200)["flat"]["entropy"]
    assert bare["value"] == pytest.approx(-(p * np.log(p)).sum() / np.log(2))  # no snapshot: the levels used


def test_spearman_is_scipys_with_ties_and_its_interval_is_seeded():
    rng = np.random.default_rng(4)
    x, y = rng.integers(20, 200, 60).astype(float), rng.integers(1, 6, 60).astype(float)
    found = spearman(x, y, unit="answers", resamples=300, seed=7, level=0.95)
    assert found.value == pytest.approx(spearmanr(x, y).statistic)
    assert found == spearman(x, y, unit="answers", resamples=300, seed=7, level=0.95)
    assert found.ci_low < found.value < found.ci_high


@pytest.mark.parametrize(("model", "family"), [
    ("openai/gpt-4o-mini", "gpt"), ("openai/o3-mini", "gpt"), ("anthropic/claude-3-5-haiku-latest", "claude"),
    ("openrouter/anthropic/claude-3.5-sonnet", "claude"), ("bedrock/anthropic.claude-3-haiku-20240307-v1:0", "claude"),
    ("gemini/gemini-1.5-pro", "gemini"), ("ollama/qwen2.5:7b", "qwen"), ("openrouter/mistralai/mixtral-8x7b", "mistral"),
    ("together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct", "llama"), ("local/gemma-3-270m", "gemma"), (None, None),
    ("bedrock/us.anthropic.claude-3-5-sonnet-20240620-v1:0", "claude"),
    ("bedrock/eu.meta.llama3-2-3b-instruct-v1:0", "llama"),
    ("bedrock/apac.anthropic.claude-3-haiku-20240307-v1:0", "claude"), ("openai/ft:gpt-4o-mini:my-org::abc123", "gpt")])
def test_model_family_reads_the_name_stem_not_the_provider(model, family):
    assert model_family(model) == family
