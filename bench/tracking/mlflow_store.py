"""A run's MLflow store: its URI, a client bound to it, and the state file of what was logged there.

The store defaults to ``sqlite:///<run folder>/mlflow.db``; ``MLFLOW_TRACKING_URI`` points a team at a server.
The state file remembers, per store, what was logged, so a re-track logs only what is new."""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from bench.core.secrets import redact
from bench.core.store import atomic_write
from bench.tracking._local_store import ensure_store

STATE = ".mlflow-state.json"  # what has been logged where: candidate → trace id, logged assessments


def tracking_uri(run_dir: str | Path) -> str:
    """Return ``$MLFLOW_TRACKING_URI`` or the run folder's own sqlite store."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(run_dir).resolve() / 'mlflow.db'}"


def shown_uri(uri: str) -> str:
    """Return a tracking URI as it may be printed: without any credentials it carries (user:password@host, a token)."""
    return redact(uri)


def _import_mlflow() -> Any:
    """Import mlflow without telemetry, warnings, INFO logs and "View run at" lines (credentials); return it."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mlflow  # noqa: PLC0415 (2 s of imports: only tracking and reviews of a tracked run need it)
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    return mlflow


def _artifact_location(run_dir: Path, local: bool) -> str | None:
    """Return where a new experiment keeps its artifacts: the run folder's ``mlartifacts`` for its own store."""
    return (run_dir.resolve() / "mlartifacts").as_uri() if local else None


def store_ready(run_dir: Path) -> Any:
    """Import mlflow quietly and, unless ``MLFLOW_TRACKING_URI`` names another store, make the run folder's own
    one if it has none, whole (a half-made one, left by a kill, set aside and said once); return mlflow."""
    mlflow = _import_mlflow()
    if "MLFLOW_TRACKING_URI" not in os.environ and (said := ensure_store(Path(run_dir).resolve())):
        print(said, file=sys.stderr, flush=True)
    return mlflow


def mlflow_module(run_dir: Path, name: str) -> Any:
    """Import mlflow quietly, point it at the run's store and experiment ``bench/<sweep>``; return the module."""
    mlflow = store_ready(run_dir)
    local = "MLFLOW_TRACKING_URI" not in os.environ
    mlflow.set_tracking_uri(tracking_uri(run_dir))
    if local:  # mlflow exports the URI it is given; keep the environment saying "the run's own store"
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    exp_name = f"bench/{name}"
    if mlflow.get_experiment_by_name(exp_name) is None:
        mlflow.create_experiment(exp_name, artifact_location=_artifact_location(run_dir, local))
    mlflow.set_experiment(exp_name)
    return mlflow


def mlflow_client(run_dir: Path, name: str) -> tuple[Any, str]:
    """Import mlflow quietly; return a client bound to the run's store (never ``mlflow.set_tracking_uri``: global
    state stays as it was) and the id of experiment ``bench/<sweep>``."""
    client = store_ready(run_dir).MlflowClient(tracking_uri(run_dir))
    exp_name = f"bench/{name}"
    exp = client.get_experiment_by_name(exp_name)
    if exp is not None:
        return client, exp.experiment_id
    local = "MLFLOW_TRACKING_URI" not in os.environ
    return client, client.create_experiment(exp_name, artifact_location=_artifact_location(run_dir, local))


def read_state(run_dir: Path) -> dict[str, Any]:
    """Return what was logged to the current store (``traces``, ``assessed``, ``reviewed``); empty for another store."""
    path = run_dir / STATE
    uri = redact(tracking_uri(run_dir))  # kept in the run folder: never a user:password@
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        state = {}
    if state.get("uri") != uri:  # another store: start over there
        state = {"uri": uri, "traces": {}, "assessed": []}
    return state


def save_state(run_dir: Path, state: dict[str, Any]) -> None:
    """Write the state file atomically (an interrupted track keeps the previous one)."""
    atomic_write(run_dir / STATE, json.dumps(state).encode())
