"""MLflow tracking of a run folder, the layer above analysis and report: what a team browses in MLflow's UI.

``import bench.tracking`` imports neither mlflow nor polars: both load on first use."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from bench.tracking.mlflow_store import STATE, shown_uri, tracking_uri
from bench.tracking.reviews import log_reviews
from bench.tracking.ui import find_store, serve

_HEAVY = {"track_run": "bench.tracking.runs",  # imports bench.analysis (polars, numpy: ~1 s)
          "log_comparison": "bench.tracking.comparisons",  # `bench compare`'s MLflow run (polars)
          "TrackingServer": "bench.tracking.server", "tracking_server": "bench.tracking.server",  # on first use
          "LiveRun": "bench.tracking.live", "live_run": "bench.tracking.live", "mark_crashed": "bench.tracking.live"}

__all__ = ["STATE", "LiveRun", "TrackingServer", "find_store", "live_run", "log_comparison", "log_reviews",
           "mark_crashed", "serve", "shown_uri", "track_run", "tracking_server", "tracking_uri"]


def __getattr__(name: str) -> Any:
    if name not in _HEAVY:
        raise AttributeError(f"module 'bench.tracking' has no attribute {name!r}")
    return getattr(import_module(_HEAVY[name]), name)
