"""One params builder for tests: defaults plus overrides, the fake provider's URL filled in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def model(mid: str, url: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    """Return a model entry on the fake provider (``openai/<name>`` at ``url``)."""
    return {"id": mid, "model": f"openai/{name or mid}", "api_base": url, **extra}


def judge(jid: str, url: str, rubric: str = "tip-v1", name: str | None = None, **extra: Any) -> dict[str, Any]:
    """Return a judge entry on the fake provider."""
    return {"id": jid, "model": f"openai/{name or jid}", "api_base": url, "rubric": rubric, **extra}


def grid(path: Path, url: str, *, name: str = "g", topics: int = 4, **overrides: Any) -> Path:
    """Write a params file: one model, one prompt, ``topics`` generated scenarios, no judge; return its path."""
    data: dict[str, Any] = {
        "name": name, "seed": 1,
        "models": [model("m1", url)],
        "prompts": [{"id": "p", "version": "v1", "user": "One tip about {topic}."}],
        "scenarios": {"generate": {"dimensions": {"topic": [f"t{i}" for i in range(topics)]}}},
        "limits": {"max_concurrency": 8, "timeout_s": 10, "retries": 0},
    }
    data.update(overrides)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def bench(tmp_path: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """Run ``python -m bench ARGS`` with its runs and reports under ``tmp_path``; return the finished process."""
    full_env = {**os.environ, "BENCH_RUNS": str(tmp_path / "runs"), "BENCH_REPORTS": str(tmp_path / "reports"),
                "PYTHONUNBUFFERED": "1", **env}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


def sweep(tmp_path: Path, params: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``bench sweep PARAMS --no-report --no-track ARGS``."""
    return bench(tmp_path, "sweep", str(params), "--no-report", "--no-track", *args, **env)
