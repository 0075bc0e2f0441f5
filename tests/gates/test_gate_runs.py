"""`bench gate` and a sweep's gates on real sweeps through the fake provider: exit 5 and valid JUnit XML when a
gate fails, 0 within bounds, the interval rule against ``strict``, win rates and agreement with human reviews."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.analysis import judge_vs_human, load_run
from bench.gates import gate_agreement
from bench.testing.grids import bench
from bench.testing.in_process import command
from tests.gates.gate_runs import cases, failed, params
from tests.judge_trust.reviewed_run import judge_grades


def test_a_regression_fails_the_gate_with_exit_5_and_junit_xml(runs):
    out = bench(runs, "gate", f"{runs}/runs/bad", "--baseline", f"{runs}/runs/good", "--max-drop", "0.5",
                "--min", "1", "--junit", f"{runs}/out/gates.xml")
    assert out.returncode == 5, out.stdout + out.stderr
    assert set(cases(runs / "out" / "gates.xml")) == {("min", "grader · m1/p@v1"), ("min", "grader · m2/p@v1"),
                                                      ("max_drop", "grader · m1/p@v1"),
                                                      ("max_drop", "grader · m2/p@v1"),
                                                      ("coverage", "baseline answers")}
    assert failed(runs / "out" / "gates.xml") == {("max_drop", "grader · m1/p@v1")}
    failure = cases(runs / "out" / "gates.xml")[("max_drop", "grader · m1/p@v1")].find("failure")
    assert "a drop beyond 0.5 shown" in failure.get("message") and "a regression" in failure.get("message")
    row = next(line for line in out.stdout.splitlines() if line.startswith("max_drop") and "m1/p@v1" in line)
    assert "FAIL" in row and "drop ≤ 0.5" in row
    assert out.stdout.splitlines()[-2:] == ["gates: 1 of 5 check(s) FAILED (exit 5)", f"junit: {runs}/out/gates.xml"]


def test_a_run_within_bounds_passes_with_exit_0(runs):
    """Runs named by their sweep's name, as `bench compare` takes them (runs/<name> under $BENCH_RUNS)."""
    out = command(runs, "gate", "peer", "--baseline", "good", "--max-drop", "1", "--min", "3", "--junit", f"{runs}/ok.xml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(cases(runs / "ok.xml")) == 5 and not failed(runs / "ok.xml")
    assert "gates: all 5 check(s) passed" in out.stdout


def test_map_pairs_a_baseline_cell_with_a_differently_named_one(runs):
    """good's m1 against bad's m2 (a weaker model): matched through --map, and the drop is caught."""
    out = command(runs, "gate", f"{runs}/runs/bad", "--baseline", f"{runs}/runs/good", "--max-drop", "0.3",
                "--map", "m1/p@v1=m2/p@v1", "--junit", f"{runs}/map.xml")
    assert out.returncode == 5, out.stdout + out.stderr
    assert failed(runs / "map.xml") == {("max_drop", "grader · m1/p@v1 → m2/p@v1")}
    first = out.stdout.splitlines()[0]  # the comparison's warnings come first: bad's m1 is left unpaired
    assert first.startswith("warning: ") and "m1/p@v1" in first, out.stdout
    bad = command(runs, "gate", f"{runs}/runs/bad", "--min", "1", "--map", "m1/p@v1")
    assert bad.returncode == 2 and "expected BASE_CELL=CELL" in bad.stderr


def test_a_drop_within_noise_passes_unless_strict(runs):
    """good's m1 is graded a little lower than peer's (of the same quality), the interval of the difference
    including zero: a drop beyond max_drop 0 is not shown (pass), nor is one within it (strict: fail)."""
    args = ["gate", f"{runs}/runs/good", "--baseline", f"{runs}/runs/peer", "--max-drop", "0", "--junit"]
    loose, strict = command(runs, *args, f"{runs}/loose.xml"), command(runs, *args, f"{runs}/strict.xml", "--strict")
    detail = cases(runs / "loose.xml")[("max_drop", "grader · m1/p@v1")].findtext("system-out")
    diff, ci = detail.split("value ")[1].split(",")[0], detail.split("95% CI [")[1].split("]")[0].split(", ")
    assert float(diff) < 0 < float(ci[1]) and float(ci[0]) < 0, detail  # the premise: a drop, within noise
    assert loose.returncode == 0 and "a drop beyond 0 not shown" in detail, loose.stdout
    # strict with max_drop 0 asks each cell to show it did not drop at all: m2, unchanged, cannot show that either
    assert strict.returncode == 5 and failed(runs / "strict.xml") == {("max_drop", "grader · m1/p@v1"),
                                                                      ("max_drop", "grader · m2/p@v1")}


def test_win_rate_and_agreement_floors_from_a_params_file(runs, tmp_path, fake_server):
    """A win rate floor on the pairwise judge; an agreement floor met by a judge whose grades the reviewer
    confirmed, and failed by one nobody reviewed and by one the reviewer contradicted."""
    shutil.copytree(runs / "runs", tmp_path / "runs", ignore=shutil.ignore_patterns(".cache"))
    path = params(tmp_path, fake_server.url, "bad", "bad",
                  gates={"baseline": "runs/good", "win_rate_min": 0.4, "agreement_min": 0.5})
    review(tmp_path, "good", agree=True)
    review(tmp_path, "bad", agree=False)
    out = command(tmp_path, "gate", f"{tmp_path}/runs/bad", "--params", str(path), "--junit", f"{tmp_path}/bad.xml")
    assert out.returncode == 5, out.stdout + out.stderr
    assert failed(tmp_path / "bad.xml") == {("win_rate_min", "arena · m1/p@v1"),
                                            ("agreement_min", "grader · composite vs humans"),
                                            ("agreement_min", "arena · verdict vs humans")}
    win = cases(tmp_path / "bad.xml")[("win_rate_min", "arena · m1/p@v1")].find("failure").get("message")
    assert win.startswith("win rate ") and "a win rate below the floor shown" in win  # bad's answers lose where good's won
    arena = cases(tmp_path / "bad.xml")[("agreement_min", "arena · verdict vs humans")]
    assert "no blind human review of its judgments" in arena.find("failure").get("message")
    good = command(tmp_path, "gate", f"{tmp_path}/runs/good", "--params", str(path), "--baseline",
                 f"{tmp_path}/runs/peer", "--junit", f"{tmp_path}/good.xml")
    assert failed(tmp_path / "good.xml") == {("agreement_min", "arena · verdict vs humans")}, good.stdout
    assert cases(tmp_path / "good.xml")[("agreement_min", "grader · composite vs humans")].findtext(
        "system-out").startswith("value 1,")


def test_the_agreement_is_the_reports_kappa_with_an_interval_around_it(runs, tmp_path):
    shutil.copytree(runs / "runs" / "bad", tmp_path / "runs" / "bad")
    review(tmp_path, "bad", agree=False, every=2)
    t = load_run(tmp_path / "runs" / "bad")
    [row] = [r for r in gate_agreement(t, resamples=200).to_dicts() if r["judge"] == "grader"]
    [report] = [r for r in judge_vs_human(t.scores, t.judgments, t.reviews).to_dicts()
                if (r["judge"], r["criterion"]) == ("grader", "composite")]
    assert (row["n"], row["kappa"]) == (report["n"], report["kappa"]) and row["n"] == 12
    assert row["ci_low"] <= row["kappa"] <= row["ci_high"] and row["ci_low"] < row["ci_high"]


def review(tmp: Path, run: str, *, agree: bool, every: int = 1) -> None:
    """Review the grader's answers of ``tmp/runs/<run>`` blind through `bench review export/apply` (only blind
    reviews measure agreement): each criterion as the judge graded it (``agree``, read from the run's records), or
    mirrored on its scale; every ``every``-th entry; pairwise entries left unreviewed."""
    folder, file = tmp / "runs" / run, tmp / f"{run}-review.json"
    out = command(tmp, "review", "export", str(folder), str(file))
    assert out.returncode == 0, out.stderr
    doc = json.loads(file.read_text())
    doc["reviewer"] = "ann"
    grader = judge_grades(folder, "grader")
    graded = [e for e in doc["entries"] if e["mode"] != "pairwise"]
    for e in graded[::every]:
        scores = grader[tuple(e["answer"])]
        e["review"] = {"scores": {c: v if agree else e["scale"][c][0] + e["scale"][c][1] - v
                                  for c, v in scores.items()}}
    file.write_text(json.dumps(doc))
    out = command(tmp, "review", "apply", str(folder), str(file))
    assert out.returncode == 0, out.stderr
