"""A sweep applies its params file's gates at its end: exit 5 and JUnit XML when one fails, 0 when all pass; a missing
baseline stops it before anything is sent. In-process (bench.testing.in_process: the command's own end); the exit
codes through scripts/nightly.sh on the command line: tests/sweep/test_exit_codes.py."""

from __future__ import annotations

import shutil

from bench.testing.in_process import command, run_stages
from tests.gates.gate_runs import QUALITY, cases, failed, params


def test_a_sweep_applies_its_gates_at_the_end_and_a_cached_run_re_sends_nothing(runs, tmp_path, fake):
    """The sweep of bad's grid under another name asks nothing again (every reply is in the response cache)."""
    shutil.copytree(runs / "runs", tmp_path / "runs", symlinks=True)
    fake.configure(model_quality=QUALITY)
    path = params(tmp_path, fake.url, "bad-pr", "bad", gates={"baseline": "runs/good", "max_drop": 0.5, "min": 1})
    out = run_stages(tmp_path, path, junit=tmp_path / "gates.xml")
    assert out.returncode == 5, out.log
    assert fake.stats()["requests"] == 0, "a re-run of a cached grid sends nothing"
    assert failed(tmp_path / "gates.xml") == {("max_drop", "grader · m1/p@v1")}
    assert len(cases(tmp_path / "gates.xml")) == 5  # min and max_drop per cell, coverage
    lines = out.stdout.splitlines()
    assert lines[-2:] == ["gates: 1 of 5 check(s) FAILED (exit 5)", f"junit: {tmp_path / 'gates.xml'}"]
    assert any(line.startswith("max_drop") and "FAIL" in line for line in lines)


def test_a_sweep_within_its_gates_exits_0(runs, tmp_path, fake):
    shutil.copytree(runs / "runs", tmp_path / "runs", symlinks=True)
    fake.configure(model_quality=QUALITY)
    path = params(tmp_path, fake.url, "peer-pr", "peer", gates={"baseline": "runs/good", "max_drop": 1.0, "min": 3})
    out = run_stages(tmp_path, path)
    assert out.returncode == 0, out.log
    assert out.stdout.splitlines()[-1] == "gates: all 5 check(s) passed"


def test_a_missing_baseline_stops_the_sweep_before_anything_is_sent(tmp_path, fake):
    path = params(tmp_path, fake.url, "orphan", "good", gates={"baseline": "runs/main", "max_drop": 0.5})
    out = command(tmp_path, "sweep", str(path), "--no-report", "--no-track")
    assert out.returncode == 2 and fake.stats()["requests"] == 0, out.log
    assert f"{path}: gates.baseline: {tmp_path / 'runs' / 'main'} is not a run folder" in out.stderr
    plain = params(tmp_path, fake.url, "plain", "good")
    out = command(tmp_path, "sweep", str(plain), "--junit", str(tmp_path / "x.xml"), "--no-report", "--no-track")
    assert out.returncode == 2 and "has no gates: section" in out.stderr and fake.stats()["requests"] == 0


def test_a_dry_run_and_a_collect_only_sweep_apply_no_gate(tmp_path, fake):
    path = params(tmp_path, fake.url, "early", "good", gates={"min": 5})
    collect = run_stages(tmp_path, path, stages=("collect",))
    assert collect.returncode == 0, collect.log
    assert "gates: skipped, nothing was graded (--only-stage collect)" in collect.stdout
    dry = run_stages(tmp_path, path, dry_run=True)
    assert dry.returncode == 0 and "gates: skipped, a dry run's grades are stand-ins" in dry.stdout, dry.log
    judged = run_stages(tmp_path, path, stages=("judge",))
    assert judged.returncode == 5 and "min" in judged.stdout and "FAIL" in judged.stdout, judged.log
