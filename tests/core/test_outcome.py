"""A sweep that ends with failed items says so: exit code 3, a summary, the retry command, and the same counts in
the HTML report and on the MLflow parent run (tests/sweep/test_sweep.py, on the command line); a clean sweep
prints no summary."""

from __future__ import annotations

from bench.testing.grids import grid
from bench.testing.in_process import command, run_stages


def test_a_clean_sweep_exits_zero_with_no_summary(tmp_path, fake):
    out = run_stages(tmp_path, grid(tmp_path / "g.yaml", fake.url))
    assert out.returncode == 0 and "failed:" not in out.stdout, out.log


def test_help_lists_every_stage(tmp_path):
    out = command(tmp_path, "sweep", "--help")
    assert out.returncode == 0 and "{collect,judge}" in out.stdout and "--wait" in out.stdout
