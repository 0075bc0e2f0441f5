"""Human review and MLflow tracking through the real path: a fake-provider sweep in-process (tracked, with a canary
API key), offline export/apply with every validation error, superseding reviews, MLflow runs, params, metrics,
traces and assessments, and nbval on notebooks/04_review.ipynb."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from bench.core.errors import BenchError
from bench.core.records import Review
from bench.review.session import ReviewSession
from bench.core.store import RunStore
from bench.testing.grids import NOT_INHERITED, ROOT, env, generate, grid, judge, model, prompt
from bench.testing.in_process import command, run_stages
from tests.repo import parameterized_copy

CANARY = "sk-canary-7f3a9c1e55d04b6e"


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory, fake_server):
    """A sweep whose every request needs the canary key, rendered and logged to MLflow; return its folder."""
    fake_server.reset()
    fake_server.configure(require_key=CANARY)
    tmp = tmp_path_factory.mktemp("review")
    url, key = fake_server.url, "OPENAI_API_KEY"
    grid(tmp / "rv.yaml", url, name="rv", seed=2,
         models=[model("m1", url, name="fake-a", api_key_env=key), model("m2", url, name="fake-b", api_key_env=key)],
         prompts=[prompt("p", "Give one tip about {topic}.")],
         scenarios=generate(topic=["email", "sleep", "focus", "lunch"]),
         judges=[judge("grader", url, name="judge", api_key_env=key),
                 judge("arena", url, rubric="arena-pairwise", name="judge", api_key_env=key, baseline="m1/p@v1")],
         limits={"max_concurrency": 8, "timeout_s": 10, "retries": 2})
    out = run_stages(tmp, tmp / "rv.yaml", report=True, track=True, drop=NOT_INHERITED, OPENAI_API_KEY=CANARY)
    fake_server.configure(require_key=None)
    assert out.returncode == 0, out.log
    assert "tracking: logged to MLflow" in out.stdout, out.log
    return out.run_dir


def mlflow_for(run_dir: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mlflow
    mlflow.set_tracking_uri(f"sqlite:///{run_dir / 'mlflow.db'}")
    os.environ.pop("MLFLOW_TRACKING_URI", None)  # mlflow exports it: keep it from the processes tests start
    return mlflow


def test_sweep_runs_params_metrics_and_traces_are_searchable_in_mlflow(tracked_run):
    mlflow = mlflow_for(tracked_run)
    runs = mlflow.search_runs(experiment_names=["bench/rv"], output_format="list")
    parents = [r for r in runs if r.data.tags.get("bench.level") == "sweep"]
    cells = {r.data.tags["bench.cell"]: r for r in runs if r.data.tags.get("bench.level") == "cell"}
    assert len(parents) == 1 and set(cells) == {"m1/p@v1", "m2/p@v1"}
    parent = parents[0]
    assert all(r.data.tags.get("mlflow.parentRunId") == parent.info.run_id for r in cells.values())
    m2 = cells["m2/p@v1"].data
    assert m2.params["model"] == "openai/fake-b" and m2.params["prompt"] == "p@v1"
    assert m2.params["judge.grader.rubric"] == "tip-v1@1" and len(m2.params["judge.grader.rubric_hash"]) == 20
    assert m2.params["scenario_set_hash"] and m2.params["judge.arena.model"] == "openai/judge"
    for key in ("judge.grader.composite.mean", "judge.grader.composite.ci_low", "judge.grader.relevance.ci_high",
                "judge.grader.composite.n", "judge.grader.n", "answers.failure_rate", "answers.latency_p95_s",
                "answers.completion_tokens", "judge.arena.win_rate"):
        assert key in m2.metrics, key
    assert m2.tags["bench.stage.collect"] == "ok"
    found = mlflow.search_runs(experiment_names=["bench/rv"], filter_string="params.prompt = 'p@v1'",
                               output_format="list")
    assert len(found) == 2
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(parent.info.run_id)}
    assert arts == {"records", "notebooks", "report"}
    traces = mlflow.search_traces(locations=[parent.info.experiment_id], return_type="list")
    assert len(traces) == 8  # one per answer
    names = {a.name for t in traces for a in t.info.assessments if a.source.source_type == "LLM_JUDGE"}
    assert {"grader.relevance", "grader.composite", "arena.verdict"} <= names


def test_no_api_key_anywhere_in_the_run_folder_or_mlflow_store(tracked_run, tmp_path):
    ReviewSession(tracked_run, reviewer="eve").export(tracked_run.parent / "review-export.json")
    leaks = [str(p) for p in tracked_run.parent.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    reports = tracked_run.parents[1] / "reports"
    leaks += [str(p) for p in reports.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert (tracked_run / "mlflow.db").exists() and (tracked_run / "mlartifacts").is_dir()
    assert leaks == []


def fill(doc: dict, reviewer: str = "ann") -> dict:
    """Fill every entry: every criterion one below the top of its scale, pairwise verdict A=B (the file is
    blind: there is no judge's grade to start from)."""
    doc["reviewer"] = reviewer
    for e in doc["entries"]:
        if e["mode"] == "pairwise":
            e["review"] = {"verdict": "A=B", "note": "tie on reading"}
        else:
            e["review"] = {"scores": {k: hi - 1 for k, (_, hi) in e["scale"].items()}, "note": "<b>one down</b>"}
    return doc


def test_export_then_apply_round_trip_logs_human_assessments(tracked_run, tmp_path):
    path = tmp_path / "review.json"
    out = command(tmp_path, "review", "export", str(tracked_run), str(path), OPENAI_API_KEY=CANARY)
    assert out.returncode == 0, out.stderr
    doc = json.loads(path.read_text())
    assert len(doc["entries"]) == 8 + 4  # 8 answers graded by grader, 4 pairs (A/B order) by arena
    path.write_text(json.dumps(fill(doc)))
    out = command(tmp_path, "review", "apply", str(tracked_run), str(path), OPENAI_API_KEY=CANARY)
    assert out.returncode == 0, out.stderr
    assert "applied 12 review(s)" in out.stdout
    reviews = RunStore(tracked_run).read(Review)
    assert len(reviews) == 12 and {r.reviewer for r in reviews} == {"ann"}
    graded = [r for r in reviews if r.scores]
    assert all(r.score == pytest.approx(sum(r.scores.values()) / 3) for r in graded)  # tip-v1's composite
    mlflow = mlflow_for(tracked_run)
    exp = mlflow.get_experiment_by_name("bench/rv")
    human = [a for t in mlflow.search_traces(locations=[exp.experiment_id], return_type="list")
             for a in t.info.assessments if a.source.source_type == "HUMAN"]
    assert {a.source.source_id for a in human} == {"ann"}
    assert {a.name for a in human} >= {"grader.relevance", "grader.composite", "arena.verdict"}


def test_apply_lists_every_problem_and_applies_nothing(tracked_run, tmp_path):
    session = ReviewSession(tracked_run, reviewer="bob")
    path = tmp_path / "bad.json"
    session.export(path)
    doc = fill(json.loads(path.read_text()), reviewer="bob")
    graded = [e for e in doc["entries"] if e["mode"] != "pairwise"]
    pair = next(e for e in doc["entries"] if e["mode"] == "pairwise")
    graded[0]["review"]["scores"]["relevance"] = 9  # outside 1–5
    graded[1]["review"]["scores"]["charm"] = 3  # unknown criterion
    graded[2]["rubric"] = "tip-v1@0"  # another rubric version
    graded[3]["judgment_id"] = "j-does-not-exist"
    del graded[4]["review"]["scores"]["tone"]  # a criterion missing
    pair["review"]["verdict"] = "A>>>B"
    path.write_text(json.dumps(doc))
    before = len(RunStore(tracked_run).read(Review))
    with pytest.raises(BenchError) as err:
        session.apply(path)
    text = str(err.value)
    assert "nothing applied; 6 problem(s)" in text
    for needle in ("relevance = 9 is outside the scale 1–5", "unknown criterion 'charm'", "is not the judgment's tip-v1@1",
                   "unknown judgment id 'j-does-not-exist'", "missing a score for tone", "verdict 'A>>>B' is not one of"):
        assert needle in text, needle
    assert len(RunStore(tracked_run).read(Review)) == before
    doc["reviewer"] = ""
    for e in doc["entries"]:
        e["review"] = None
    doc["entries"][0]["review"] = {"scores": {"relevance": 3, "actionability": 3, "tone": 3}}
    path.write_text(json.dumps(doc))
    with pytest.raises(BenchError, match="no reviewer"):
        ReviewSession(tracked_run, reviewer="").apply(path)


def test_a_later_review_supersedes_and_history_is_kept(tracked_run):
    from bench.analysis import load_run, summarize

    session = ReviewSession(tracked_run, reviewer="cy")
    item = next(it for it in session.select("all") if not it.pairwise)
    jid = item.reviewable()[0].id
    session.save(jid, scores={"relevance": 1, "actionability": 1, "tone": 1}, note="first look")
    session.save(jid, scores={"relevance": 5, "actionability": 5, "tone": 5}, note="second look")
    history = [r for r in RunStore(tracked_run).read(Review) if r.judgment_id == jid and r.reviewer == "cy"]
    assert [r.note for r in history] == ["first look", "second look"]
    t = load_run(tracked_run)
    assert t.reviews.filter((t.reviews["judgment"] == jid) & (t.reviews["reviewer"] == "cy"))["value"].unique().to_list() == [5.0]
    overridden = summarize(tracked_run, resamples=50, human_overrides=True)
    values = overridden.tables.scores.filter(overridden.tables.scores["judgment"] == jid)["value"].unique().to_list()
    assert values == [5.0]
    with pytest.raises(BenchError, match="outside the scale"):
        session.save(jid, scores={"relevance": 0, "actionability": 1, "tone": 1})


def test_review_notebook_passes_nbval(tracked_run, tmp_path):
    nb = parameterized_copy(ROOT / "notebooks" / "04_review.ipynb", tmp_path / "04_review.ipynb",
                            run_dir=str(tracked_run), reviewer="nbval")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", str(nb)],
                         cwd=tmp_path, env=env(tmp_path, OPENAI_API_KEY=CANARY), capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-4000:]


def test_a_tracking_failure_warns_and_does_not_fail_the_command(tracked_run, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    out = command(tmp_path, "track", str(tracked_run), drop=NOT_INHERITED, OPENAI_API_KEY=CANARY,
                  MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path}/a-file/mlflow.db")
    assert out.returncode == 0
    assert "tracking: MLflow logging of" in out.stderr and "the run's records are unaffected" in out.stderr
