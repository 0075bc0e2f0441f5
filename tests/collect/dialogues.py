"""What the conversation tests share: a tool, params written on the fake provider, a collect stage run in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.run import Run, open_run
from bench.stage_runs import run_collect
from bench.testing import grids

WEATHER = {"name": "get_weather", "description": "Current weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
           "result": "Weather in {city}: {weather}"}


def inline(*fields: dict[str, Any]) -> dict[str, Any]:
    """Return a ``scenarios`` section listing these scenarios' fields."""
    return {"inline": [{"fields": f} for f in fields]}


def write(path: Path, url: str, **overrides: Any) -> Path:
    """Write a params file (name ``c``) on the fake provider: one model, the given prompts, tools and scenarios."""
    return grids.grid(path, url, name="c", **overrides)


def use_runs(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Put this test's run folders and response cache under ``folder``."""
    monkeypatch.setenv("BENCH_RUNS", str(folder))
    monkeypatch.delenv("BENCH_CACHE", raising=False)


def collect(params: Path) -> Run:
    """Open the run of ``params`` and run its collect stage (no progress bar); return the run."""
    run = open_run(params)
    asyncio.run(run_collect(run, progress="none"))
    return run


def candidates(run: Run) -> dict[str, Candidate]:
    """Return the latest candidate of each id, by prompt id and scenario position (``chat/0``, …)."""
    order = {s.id: n for n, s in enumerate(run.scenarios)}
    return {f"{c.prompt_id}/{order[c.scenario_id]}" + (f"#{c.sample}" if c.sample else ""): c
            for c in RunStore(run.dir).latest(Candidate).values()}


def every(run: Run) -> list[Candidate]:
    """Return every candidate record of the run, attempts included, in the order written."""
    return list(RunStore(run.dir).read(Candidate))
