"""What the project's tests and benchmarks run against (never bench itself): the fake provider, the params builder
and the test kit. Names load lazily: ``python -m bench.testing.fake_provider`` imports only stdlib and aiohttp."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "FakeProvider": "fake_provider", "DEFAULT_CONFIG": "fake_provider",
    "params": "grids", "grid": "grids", "model": "grids", "judge": "grids", "prompt": "grids",
    "generate": "grids", "rubric": "grids", "env": "grids", "bench": "grids", "sweep": "grids", "sweep_args": "grids",
    "started": "grids", "ROOT": "grids", "hermetic": "grids",
    "run_stages": "in_process", "StagesRun": "in_process", "command": "in_process", "Finished": "in_process",
    "scenario": "records", "candidate": "records", "judgment": "records",
    "free_port": "processes", "tree": "processes", "listening": "processes", "read_line": "processes",
    "fetch_when_up": "processes", "stopped_at_exit": "processes",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.testing' has no attribute {name!r}")
    return getattr(import_module(f"bench.testing.{module}"), name)
