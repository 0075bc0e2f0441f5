"""What a gate must see although nothing was scored there: a cell whose answers all failed (min and max_drop
fail, the comparison keeps its row), the baseline's answers the run lacks (coverage), a stale cell of a reused
run folder (not gated at a sweep's end), and `--no-strict` over a params file's ``strict: true``."""

from __future__ import annotations

import shutil

from bench.analysis import compare_runs
from bench.testing.fake_provider import FakeProvider
from bench.testing.grids import generate, grid, judge, model
from bench.testing.in_process import command, run_stages
from tests.gates.gate_runs import QUALITY, SCENARIOS, cases, failed, params


def test_a_cell_whose_answers_all_failed_fails_its_gates(runs, tmp_path, fake):
    """The run's m1 endpoint answers 500 to every request: no m1 answer is graded, and its checks fail."""
    shutil.copytree(runs / "runs" / "good", tmp_path / "runs" / "good")
    fake.configure(model_quality=QUALITY)
    with FakeProvider(replies=[{"match": "", "status": 500}]) as dead:
        path = grid(tmp_path / "pr.yaml", fake.url, name="pr",
                    models=[model("m1", dead.url, name="good"), model("m2", fake.url, name="ref")],
                    scenarios=generate(topic=[f"topic {i}" for i in range(SCENARIOS)]),
                    judges=[judge("grader", fake.url, name="judge")], limits={"retries": 0})
        out = run_stages(tmp_path, path)
    assert out.returncode == 3, out.stdout[-3000:] + out.stderr[-3000:]  # the premise: m1's 12 answers failed
    gate = command(tmp_path, "gate", f"{tmp_path}/runs/pr", "--baseline", f"{tmp_path}/runs/good", "--max-drop",
                 "0.25", "--min", "1", "--junit", f"{tmp_path}/g.xml")
    assert gate.returncode == 5, gate.stdout + gate.stderr
    assert failed(tmp_path / "g.xml") == {("min", "grader · m1/p@v1"), ("max_drop", "grader · m1/p@v1"),
                                          ("coverage", "baseline answers")}  # coverage counts grades
    drop = cases(tmp_path / "g.xml")[("max_drop", "grader · m1/p@v1")].find("failure").get("message")
    assert drop.startswith("no graded item in this run: none of its 12 answer(s)"), drop
    assert "warning: cell m1/p@v1: none of its 12 answer(s) in run B (pr) has a grade of judge grader" in gate.stdout
    cmp = compare_runs(tmp_path / "runs" / "good", tmp_path / "runs" / "pr", n_boot=100)
    [row] = cmp.rows.filter((cmp.rows["cell_b"] == "m1/p@v1") & (cmp.rows["criterion"] == "composite")).to_dicts()
    assert (row["n_matched"], row["n_unscored"], row["significant"]) == (0, 12, False) and row["diff"] != row["diff"]
    [listed] = [r for r in cmp.to_json()["rows"] if r["cell_b"] == "m1/p@v1" and r["criterion"] == "composite"]
    assert listed["diff"] is None and listed["n_matched"] == 0, "JSON: the lost cell's row, with no difference"


def test_answers_the_baseline_has_and_the_run_lacks_fail_coverage_unless_allowed(runs, tmp_path, fake):
    """The run drops two of the baseline's twelve scenarios: the four answers (2 scenarios × 2 cells) are listed."""
    shutil.copytree(runs / "runs", tmp_path / "runs", symlinks=True)
    fake.configure(model_quality=QUALITY)
    path = grid(tmp_path / "fewer.yaml", fake.url, name="fewer",
                models=[model("m1", fake.url, name="good"), model("m2", fake.url, name="ref")],
                scenarios=generate(topic=[f"topic {i}" for i in range(SCENARIOS - 2)]),
                judges=[judge("grader", fake.url, name="judge")])
    assert run_stages(tmp_path, path).returncode == 0
    args = ["gate", f"{tmp_path}/runs/fewer", "--baseline", f"{tmp_path}/runs/good", "--max-drop", "1"]
    out = command(tmp_path, *args, "--junit", f"{tmp_path}/c.xml")
    assert out.returncode == 5, out.stdout + out.stderr
    assert failed(tmp_path / "c.xml") == {("coverage", "baseline answers")}
    message = cases(tmp_path / "c.xml")[("coverage", "baseline answers")].find("failure").get("message")
    assert message.startswith("4 of 24 grade(s) of the baseline missing from this run: grader · m1/p@v1 ")
    assert message.count("#0") == 4 and "--allow-missing" in message
    allowed = command(tmp_path, *args, "--allow-missing")
    assert allowed.returncode == 0 and "(allowed: allow_missing)" in allowed.stdout, allowed.stdout
    same = command(tmp_path, "gate", f"{tmp_path}/runs/peer", "--baseline", f"{tmp_path}/runs/good", "--max-drop", "1")
    assert "coverage  baseline answers  1.000" in same.stdout and same.returncode == 0, same.stdout


def test_no_strict_overrides_a_params_files_strict(runs, tmp_path, fake):
    """good's m1 drops from peer's within noise: strict: true fails it (not shown within 0), --no-strict passes it
    again (a drop beyond 0 not shown)."""
    shutil.copytree(runs / "runs", tmp_path / "runs", symlinks=True)
    path = params(tmp_path, fake.url, "good", "good", gates={"baseline": "runs/peer", "max_drop": 0, "strict": True})
    strict = command(tmp_path, "gate", f"{tmp_path}/runs/good", "--params", str(path))
    assert strict.returncode == 5 and "strict: keeping the bound must be shown" in strict.stdout, strict.stdout
    loose = command(tmp_path, "gate", f"{tmp_path}/runs/good", "--params", str(path), "--no-strict")
    assert loose.returncode == 0 and "a drop beyond 0 not shown" in loose.stdout, loose.stdout + loose.stderr


def test_a_sweep_gates_only_its_params_current_cells(runs, tmp_path, fake):
    """The folder holds m1 (graded far below 3) from an earlier grid; the params now have m2 alone."""
    shutil.copytree(runs / "runs", tmp_path / "runs", symlinks=True)
    fake.configure(model_quality=QUALITY)
    both = params(tmp_path, fake.url, "reused", "bad")
    assert run_stages(tmp_path, both).returncode == 0
    only = grid(tmp_path / "reused.yaml", fake.url, name="reused", models=[model("m2", fake.url, name="ref")],
                scenarios=generate(topic=[f"topic {i}" for i in range(SCENARIOS)]),
                judges=[judge("grader", fake.url, name="judge")], gates={"min": 3})
    out = run_stages(tmp_path, only, junit=tmp_path / "s.xml")  # the sweep's own gate, as `bench sweep` ends
    assert set(cases(tmp_path / "s.xml")) == {("min", "grader · m2/p@v1")}, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.returncode == 0 and out.stdout.splitlines()[-2] == "gates: all 1 check(s) passed"
    stale = command(tmp_path, "gate", f"{tmp_path}/runs/reused", "--min", "3")  # by hand: the folder's every cell
    assert stale.returncode == 5, stale.stdout
    assert any(line.startswith("min") and "grader · m1/p@v1" in line and "FAIL" in line
               for line in stale.stdout.splitlines()), stale.stdout
