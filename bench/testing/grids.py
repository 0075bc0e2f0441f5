"""One params builder for tests and benchmarks: defaults plus overrides, the fake provider's URL filled in.

:func:`params` returns a params file's content as a dict, :func:`grid` writes it; by default
one model on the fake provider, one prompt, ``topics`` generated scenarios, no judge. Each
keyword overrides a top-level key (``judges=[judge("grader", url)]``); ``None`` leaves the key
out. :func:`model`, :func:`judge`, :func:`prompt` and :func:`generate` build the entries.
:func:`bench` and :func:`sweep` run the ``bench`` command with its runs under a test's folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]  # the checkout: bench/testing/grids.py -> the project root
KEY_ORDER = ("name", "seed", "models", "prompts", "scenarios", "judges", "limits")  # as a params file reads


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a value shared by several entries (one ``price`` dict) in full each time, never as ``*id001``."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def model(mid: str, url: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    """Return a model entry on the fake provider (``openai/<name>`` at ``url``)."""
    return {"id": mid, "model": f"openai/{name or mid}", "api_base": url, **extra}


def judge(jid: str, url: str, rubric: str = "tip-v1", name: str | None = None, **extra: Any) -> dict[str, Any]:
    """Return a judge entry on the fake provider."""
    return {"id": jid, "model": f"openai/{name or jid}", "api_base": url, "rubric": rubric, **extra}


def prompt(pid: str, user: str, version: str = "v1", **extra: Any) -> dict[str, Any]:
    """Return a prompt entry (``system`` and other keys go in ``extra``)."""
    return {"id": pid, "version": version, **extra, "user": user}


def generate(**dimensions: list[Any]) -> dict[str, Any]:
    """Return a ``scenarios`` section generating the product of ``dimensions``."""
    return {"generate": {"dimensions": dimensions}}


def params(url: str, *, name: str = "g", topics: int = 4, **overrides: Any) -> dict[str, Any]:
    """Return a params file's content: one model, one prompt, ``topics`` generated scenarios, no judge.

    Each override replaces a top-level key (an override of ``None`` leaves that key out).
    """
    data: dict[str, Any] = {
        "name": name, "seed": 1,
        "models": [model("m1", url)],
        "prompts": [prompt("p", "One tip about {topic}.")],
        "scenarios": generate(topic=[f"t{i}" for i in range(topics)]),
        "limits": {"max_concurrency": 8, "timeout_s": 10, "retries": 0},
    }
    data.update(overrides)
    ordered = [*(key for key in KEY_ORDER if key in data), *(key for key in data if key not in KEY_ORDER)]
    return {key: data[key] for key in ordered if data[key] is not None}


def grid(path: Path, url: str, *, name: str = "g", topics: int = 4, **overrides: Any) -> Path:
    """Write :func:`params` (same arguments) to ``path`` as YAML; return the path."""
    data = params(url, name=name, topics=topics, **overrides)
    path.write_text(yaml.dump(data, Dumper=_NoAliasDumper, sort_keys=False))
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
