"""bench: a Jupyter-first workbench for evaluating LLMs and prompts with LLM judges.

The public surface is small and imported lazily, so `import bench` stays cheap
(LiteLLM, MLflow, plotly, polars and papermill load only where they are used).

Importing bench first makes LiteLLM, whoever imports it later in this process or its
children, use its bundled price map instead of downloading one (which blocks without
internet); ``BENCH_ONLINE_PRICES=1`` opts out (see bench._litellm).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from ._litellm import use_local_prices as _use_local_prices

_use_local_prices()  # before anything can import litellm: the CLI, notebooks, kernels, `bench ui`'s server

__version__ = "0.1.0"

_EXPORTS = {
    "BenchError": "errors", "ParamsError": "errors", "PreflightError": "errors",
    "ProviderError": "errors", "LocalModelError": "errors", "StoreError": "errors",
    "JudgeParseError": "errors",
    "Scenario": "records", "Candidate": "records", "Judgment": "records", "Review": "records",
    "Usage": "records",
    "RunStore": "store",
    "ResponseCache": "cache",
    "ModelSpec": "routing",
    "LLM": "llm", "Limits": "llm", "Completion": "llm", "complete": "llm", "configure": "llm",
    "preflight": "preflight",
    "open_run": "run", "run_collect": "run", "run_judge": "run", "Run": "run",
    "load_sweep": "params", "Sweep": "params",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench' has no attribute {name!r}")
    return getattr(import_module(f"bench.{module}"), name)
