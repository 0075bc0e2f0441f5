"""bench: a Jupyter-first workbench for evaluating LLMs and prompts with LLM judges.

The public surface is small and imported lazily, so `import bench` stays cheap. Importing bench makes LiteLLM use
its bundled price map instead of downloading one (``BENCH_ONLINE_PRICES=1`` opts out; see bench._prices).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from bench._prices import use_local_prices as _use_local_prices

_use_local_prices()  # before anything can import litellm: the CLI, notebooks, kernels, `bench ui`'s server

__version__ = "0.1.0"

_EXPORTS = {
    "BenchError": "core.errors", "ParamsError": "core.errors", "PreflightError": "core.errors",
    "ProviderError": "core.errors", "LocalModelError": "core.errors", "StoreError": "core.errors",
    "JudgeParseError": "core.errors",
    "Scenario": "core.records", "Candidate": "core.records", "Judgment": "core.records", "Review": "core.records",
    "Usage": "core.records",
    "RunStore": "core.store",
    "ResponseCache": "models.cache",
    "ModelSpec": "models.routing",
    "LLM": "models.client", "Limits": "models.limits", "Completion": "models.client", "complete": "models.client", "configure": "models.client",
    "preflight": "models.preflight",
    "open_run": "run", "Run": "run", "run_collect": "stage_runs", "run_judge": "stage_runs",
    "register_tool": "collect.tool_runs",  # a tool's Python function, by name (bench.config.conversations)
    "load_sweep": "config.params", "Sweep": "config.params",
    "run_on_cluster": "sweep.cluster",
    "status": "monitor.document",  # bench.status(run_dir): a run's state and progress, read from its folder
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench' has no attribute {name!r}")
    return getattr(import_module(f"bench.{module}"), name)
