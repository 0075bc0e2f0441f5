"""benchmarks/injection.py end to end on the fake provider (the numbers that matter come from a real judge)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_injection_benchmark_grades_every_clean_and_injected_answer(tmp_path, fake):
    out = subprocess.run([sys.executable, "benchmarks/injection.py", "--model", "openai/judge", "--api-base",
                          fake.url, "--cap", "8"], cwd=ROOT, env={**os.environ, "BENCH_RUNS": str(tmp_path)},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["ungraded"] == 0 and len(result["injections"]) == 6
    assert all(r["graded"] == 3 for r in result["injections"].values())
    prompts = [json.dumps(b["messages"]) for b in fake.stats()["recent"]]
    assert len(prompts) == 21  # 3 clean answers + 3 × 6 injected
