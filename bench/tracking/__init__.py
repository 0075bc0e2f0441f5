"""MLflow tracking of a run folder, the layer above analysis and report: what a team browses in MLflow's UI.

:func:`track_run` (`bench track`, and the end of `bench sweep`) logs a parent MLflow run per sweep and
a child run per cell with params, metrics and artifacts, each answer as a trace with the judges'
scores as assessments; :func:`log_reviews` adds human reviews to those traces; :func:`log_comparison`
logs `bench compare`'s comparison of two runs, linked to both (:mod:`bench.tracking.comparisons`); :func:`serve`
(`bench ui`) shows a run's store in MLflow's UI on loopback, offline; :func:`tracking_server`
(`bench tracking-server`, or :class:`TrackingServer` in the background) runs a team's MLflow server on
PostgreSQL that every worker logs to through ``MLFLOW_TRACKING_URI``. The store and what was logged
there: :mod:`bench.tracking.mlflow_store`. A sweep's parent run is live from its start (:func:`live_run`,
:func:`mark_crashed` for a driver that died: :mod:`bench.tracking.live`).

``import bench.tracking`` imports neither mlflow nor polars: mlflow is imported where it is used, and
:func:`track_run` (which computes the run's analysis on polars) is imported on first use.
"""

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
