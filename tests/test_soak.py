"""A few kill-and-resume trials of benchmarks/soak.py in CI (the benchmark runs 20 or more)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_killed_sweeps_resume_to_the_uninterrupted_result(tmp_path):
    temp = tmp_path / "tmp"  # the benchmark's temporary folders go here: none may stay behind
    temp.mkdir()
    out = subprocess.run([sys.executable, "benchmarks/soak.py", "--trials", "3", "--seed", "11"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900, env={**os.environ, "TMPDIR": str(temp)})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert '"failed": 0' in out.stdout.splitlines()[-1]
    assert not list(temp.iterdir()), "the soak benchmark left its run folders behind"
