"""`bench align` end to end on the fake provider: a judge that misreads one anchor, reviewed blind through the
real review path, aligned by cross-validation into a rubric version that a sweep uses at once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.align.variants import KINDS
from bench.config.rubrics import load_rubric
from bench.testing.grids import grid, judge, model, generate
from bench.testing.in_process import run_stages
from tests.align.aligned_run import (ANSWERS_PER_MODEL, REWRITTEN, align, aligned_params, fake_config, review,
                                     swept)

ANSWERS = 2 * ANSWERS_PER_MODEL


@pytest.fixture(scope="module")
def aligned(tmp_path_factory, fake_server):
    """(tmp, run folder, params, the first `bench align`'s process, its record, requests it sent)."""
    fake_server.reset()
    fake_server.configure(**fake_config())
    tmp = tmp_path_factory.mktemp("align")
    params = aligned_params(tmp, fake_server.url)
    run = swept(tmp, params)
    fixed = review(tmp, run)
    assert fixed >= 4, "the judge should misread several of the 24 answers' quality"
    before = fake_server.stats()["requests"]
    out = align(tmp, run, params)
    assert out.returncode == 0, out.stdout + out.stderr
    records = sorted((run / "align").glob("grader-*.json"))
    assert len(records) == 1
    return tmp, run, params, out, json.loads(records[0].read_text()), fake_server.stats()["requests"] - before


def test_align_improves_held_out_agreement_and_says_so(aligned):
    _tmp, _run, _params, out, doc, sent = aligned
    before, after = doc["before"], doc["after"]
    assert doc["reviewed_answers"] == ANSWERS and doc["k"] == 3 and doc["chosen"] in KINDS
    assert after["kappa"] > before["kappa"] + 0.25, (before, after)
    assert after["ci_low"] > before["kappa"], "the aligned judge's interval lies above the judge as it was"
    for got in (before, after):
        assert got["ci_low"] < got["kappa"] < got["ci_high"]
    for kind in KINDS:  # every variant was built and scored on every held-out answer
        v = doc["variants"][kind]
        assert v["error"] is None and v["agreement"]["answers"] == ANSWERS and len(v["grades"]) == ANSWERS
    assert f"{before['kappa']:.2f} [{before['ci_low']:.2f}, {before['ci_high']:.2f}]" in out.stdout
    assert f"{after['kappa']:.2f} [{after['ci_low']:.2f}, {after['ci_high']:.2f}]" in out.stdout
    assert "estimate: judge openai/judge: 72 of 72 requests to send" in out.stdout  # 3 variants × 24 held-out
    final = doc["chosen"] in ("anchors", "both")  # the optimizer once per fold, and once over all for the version
    assert sent == doc["usage"]["calls"]  # the last may be one a fold asked already: from the cache
    assert doc["usage"]["calls"] + doc["usage"]["cache_hits"] == 72 + 3 + final
    assert "mlflow: alignment run" in out.stdout


def test_the_written_rubric_version_is_valid_with_its_provenance(aligned):
    tmp, run, params, out, doc, _sent = aligned
    assert doc["written"] == "tipx-aligned-1"
    rubric = load_rubric("rubrics/tipx-aligned-1.md", tmp)  # the one rubric loader accepts it
    source = load_rubric("rubrics/tipx.md", tmp)
    assert (rubric.id, rubric.version, rubric.mode) == ("tipx-aligned-1", "1", "rubric")
    assert [c.id for c in rubric.criteria] == [c.id for c in source.criteria]
    p = rubric.provenance
    assert p["source"] == "tipx@1" and p["source_hash"] == source.hash and p["run"] == run.name
    assert p["judge"] == "grader" and p["variant"] == doc["chosen"] and p["folds"] == 3
    assert p["heldout_kappa_before"] == [doc["before"][k] for k in ("kappa", "ci_low", "ci_high")]
    assert p["heldout_kappa_after"] == [doc["after"][k] for k in ("kappa", "ci_low", "ci_high")]
    assert p["reviewed_answers"] == ANSWERS and p["optimizer"] == "openai/optimizer" and p["date"]
    shows = REWRITTEN in rubric.criterion("quality").anchors[4] or "quality: 4" in rubric.body
    assert shows, "the chosen variant shows the judge what a 4 is"
    assert "rubric: rubrics/tipx-aligned-1.md" in out.stdout


def test_a_sweep_uses_the_aligned_version_at_once_and_no_longer_misreads(aligned, fake_server):
    tmp, _run, _params, _out, _doc, _sent = aligned
    url = fake_server.url
    again = grid(tmp / "realigned.yaml", url, name="realigned", models=[model("m1", url), model("m2", url)],
                 scenarios=generate(topic=[f"topic {i}" for i in range(ANSWERS_PER_MODEL)]),
                 judges=[judge("grader", url, rubric="rubrics/tipx-aligned-1.md", name="judge")])
    out = run_stages(tmp, again)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    graded = [json.loads(line) for line in (tmp / "runs" / "realigned" / "judgments.jsonl").read_text().splitlines()]
    assert len(graded) == ANSWERS and all(j["rubric_id"] == "tipx-aligned-1" and j["scores"] for j in graded)
    assert not [j for j in graded if j["scores"]["quality"] == 1], "the aligned judge reads the anchor of 4 right"


def test_a_second_align_sends_nothing_and_writes_nothing_new(aligned, fake_server):
    tmp, run, params, _out, doc, _sent = aligned
    before = fake_server.stats()["requests"]
    out = align(tmp, run, params)
    assert out.returncode == 0, out.stdout + out.stderr
    assert fake_server.stats()["requests"] == before
    assert "requests: 0 sent" in out.stdout and "already written" in out.stdout
    assert "estimate: judge openai/judge: 0 of 72 requests to send (72 cached)" in out.stdout
    assert sorted(p.name for p in (tmp / "rubrics").glob("tipx-aligned-*.md")) == ["tipx-aligned-1.md"]
    again = json.loads((run / "align" / f"grader-{doc['key']}.json").read_text())
    assert again["after"] == doc["after"] and again["chosen"] == doc["chosen"]


def test_no_review_both_builds_and_scores_a_variant(aligned):
    _tmp, _run, _params, _out, doc, _sent = aligned
    units = set(doc["variants"]["examples"]["grades"])
    assert len(units) == ANSWERS and len(doc["folds"]) == 3
    held = []
    for f in doc["folds"]:
        train, test = set(f["train"]), set(f["test"])
        assert not train & test and train | test == units
        assert f["examples"] and set(f["examples"]) <= train  # the few-shot examples come from the train answers
        assert f["optimizer_shown"] and set(f["optimizer_shown"]) <= train  # and so does what the optimizer saw
        held += f["test"]
    assert sorted(held) == sorted(units), "every reviewed answer is held out exactly once"


def test_too_few_reviews_for_k_folds_is_refused_with_the_counts(aligned, fake_server):
    tmp, run, params, _out, _doc, _sent = aligned
    before = fake_server.stats()["requests"]
    out = align(tmp, run, params, "--k", "13")
    assert out.returncode == 2 and fake_server.stats()["requests"] == before
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1 and "bench align: error: too few reviews" in line
    assert f"{ANSWERS} answer(s) reviewed blind, and 13 folds need at least 26" in line


def test_dry_run_estimates_and_a_budget_too_small_refuses_before_sending(aligned, fake_server):
    tmp, run, params, _out, _doc, _sent = aligned
    before = fake_server.stats()["requests"]
    out = align(tmp, run, params, "--k", "4", "--dry-run")  # new folds: new few-shot prompts, most not cached
    assert out.returncode == 0 and "--dry-run: nothing was sent" in out.stdout
    to_send = re.search(r"estimate: judge openai/judge: (\d+) of 72 requests to send", out.stdout)
    assert to_send and int(to_send.group(1)) > 0
    priced = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    tight = aligned_params(tmp, fake_server.url, name="tight", limits={"max_concurrency": 8, "timeout_s": 10,
                                                                       "retries": 0, "budget_usd": 1e-6},
                           price=priced)
    out = align(tmp, run, tight, "--k", "4")
    assert out.returncode == 4, out.stdout + out.stderr
    assert "limits.budget_usd" in out.stderr and "nothing was sent" in out.stderr
    assert fake_server.stats()["requests"] == before


def test_reviews_that_saw_the_judges_do_not_count(aligned, fake_server):
    tmp, _run, _params, _out, _doc, _sent = aligned
    params = aligned_params(tmp, fake_server.url, name="shown")  # the same grid: every request is cached
    run = swept(tmp, params)
    review(tmp, run, blind=False)
    out = align(tmp, run, params)
    assert out.returncode == 2, out.stdout + out.stderr
    assert (f"0 answer(s) reviewed blind (and {ANSWERS} more with the judges' grades shown, which do not count), "
            f"and 3 folds need at least 6") in out.stderr


def test_the_alignment_is_an_mlflow_run_in_the_run_folders_store(aligned):
    import mlflow  # noqa: PLC0415 (2 s: only this test reads the store)

    _tmp, run, _params, _out, doc, _sent = aligned
    client = mlflow.MlflowClient(f"sqlite:///{run / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"bench/{run.name}")
    found = client.search_runs([exp.experiment_id], filter_string="tags.`bench.level` = 'alignment'")
    assert len(found) == 1  # the second `bench align` updated the same run
    tags, metrics = found[0].data.tags, found[0].data.metrics
    assert tags["bench.align.judge"] == "grader" and tags["bench.align.source"] == "tipx@1"
    assert tags["bench.align.variant"] == doc["chosen"] and tags["bench.align.rubric"] == "tipx-aligned-1"
    assert metrics["kappa_before"] == pytest.approx(doc["before"]["kappa"])
    assert metrics["kappa_after.ci_low"] == pytest.approx(doc["after"]["ci_low"])
    assert metrics["reviewed_answers"] == ANSWERS
