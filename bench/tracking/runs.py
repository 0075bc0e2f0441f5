"""`bench track`: a run folder logged to MLflow, one parent run per sweep and one child run per cell.

Re-tracking updates the same MLflow runs and adds only new traces and assessments; a failure prints a warning
(docs/tracking.md)."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.analysis.summary import summarize
from bench.analysis.tables import RunTables
from bench.core.executions import workers
from bench.core.records import canonical_json, content_hash, hashed_mode
from bench.core.secrets import redact
from bench.tracking._console import TrackingProgress, warn
from bench.tracking._metrics import cell_metrics, sweep_metrics
from bench.tracking._run_records import RunRecords
from bench.tracking._traces import log_traces
from bench.tracking.mlflow_store import mlflow_client


def track_run(run_dir: str | Path, *, status: dict[str, str] | None = None, report: str | Path | None = None,
              resamples: int = 1000, parent: str | None = None) -> str | None:
    """Log a run folder to MLflow; return the parent MLflow run id, or None if tracking failed (warned).
    ``parent``: the sweep's live run, left for its sweep to end."""
    run_dir = Path(run_dir)
    try:
        return _track_run(run_dir, status or {}, Path(report) if report else None, resamples, parent)
    except Exception as err:  # tracking is never fatal
        warn(f"MLflow logging of {run_dir}", err)
        return None


def _track_run(run_dir: Path, status: dict[str, str], report: Path | None, resamples: int,
               live: str | None = None) -> str:
    with TrackingProgress() as progress:
        progress.begin("reading the run and opening the MLflow store")
        with ThreadPoolExecutor(1, thread_name_prefix="bench-tracking-store") as pool:
            store = pool.submit(mlflow_client, run_dir, run_dir.name)  # mlflow's import and a new store's tables
            s = summarize(run_dir, resamples=resamples)
            t = s.tables
            rec = RunRecords(run_dir)
            client, exp_id = store.result()
        cells = t.candidates["cell"].unique().sort().to_list()
        progress.begin("runs", 1 + len(cells))
        grid = _grid(t, rec)
        runs = _runs(client, exp_id, t.name, grid["hash"])
        stages = {f"bench.stage.{k}": v for k, v in status.items()}
        sweep_tags = {"bench.sweep": t.name, "bench.level": "sweep", "bench.grid": grid["hash"]}
        if live is not None:  # the sweep's live run: its grid, tagged now (a re-track finds it by it)
            _log_params(client, live, sweep_tags, grid["params"])
        parent = live or runs.get(None) or _create_run(client, exp_id, sweep_tags, t.name, grid["params"],
                                                       rec.start_ms(None))
        # a sweep's live run keeps how its sweep ended (status, end time), also when tracked again later
        live = live or (parent if client.get_run(parent).data.tags.get("bench.live") == "1" else None)
        _log_run(client, parent, sweep_metrics(s),
                 {**stages, "bench.outcome": "failed items" if not s.failures.is_empty() else "ok",
                  **({"bench.workers": str(len(ran_on))} if (ran_on := workers(run_dir)) else {})},
                 None if live else rec.end_ms(None))
        progress.add(1)
        for cell in cells:
            child = runs.get(cell) or _create_run(
                client, exp_id, {"bench.sweep": t.name, "bench.level": "cell", "bench.cell": cell,
                                 "bench.grid": grid["hash"], "mlflow.parentRunId": parent}, cell,
                {**grid["params"], **_cell_params(rec, cell)}, rec.start_ms(cell))
            runs[cell] = child
            _log_run(client, child, cell_metrics(s, cell), {**stages, "mlflow.parentRunId": parent}, rec.end_ms(cell))
            progress.add(1)
        progress.begin("artifacts")
        _log_artifacts(client, parent, run_dir, report)
        log_traces(client, exp_id, run_dir, rec, runs, progress)
    return parent


def _runs(client: Any, exp_id: str, sweep: str, grid_hash: str) -> dict[str | None, str]:
    """Return the ids of this sweep's MLflow runs of this grid: the parent under None, each cell's under its key."""
    if not re.fullmatch(r"[0-9a-f]+", grid_hash):
        raise ValueError(f"grid hash {grid_hash!r} is not a hex digest")
    # only the hex hash goes into the filter: names (a run folder can be called anything) are compared
    # here, never spliced into MLflow's filter language
    query = f"tags.`bench.grid` = '{grid_hash}'"
    out: dict[str | None, str] = {}
    for r in client.search_runs([exp_id], filter_string=query, max_results=10000):  # newest first
        if r.data.tags.get("bench.sweep") != sweep:
            continue
        level = r.data.tags.get("bench.level")
        out.setdefault(None if level == "sweep" else r.data.tags.get("bench.cell", ""), r.info.run_id)
    return out


def _create_run(client: Any, exp_id: str, tags: dict[str, str], name: str, params: dict[str, Any],
                start_ms: int) -> str:
    """Create an MLflow run starting at ``start_ms`` with these tags and params (one batch); return its id."""
    from mlflow.entities import Param  # noqa: PLC0415 (mlflow: loaded meanwhile, see _track_run)

    run_id = client.create_run(exp_id, start_time=start_ms, tags=tags, run_name=name).info.run_id
    client.log_batch(run_id, params=[Param(k, _param(v)) for k, v in params.items()])
    return run_id


def _log_params(client: Any, run_id: str, tags: dict[str, str], params: dict[str, Any]) -> None:
    """Log tags and params on an existing run (a sweep's live run) in one batch."""
    from mlflow.entities import Param, RunTag  # noqa: PLC0415 (mlflow: loaded meanwhile, see _track_run)

    client.log_batch(run_id, params=[Param(k, _param(v)) for k, v in params.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])


def _log_run(client: Any, run_id: str, metrics: dict[str, float], tags: dict[str, str], end_ms: int | None) -> None:
    """Log a run's metrics and tags in one batch and end it at ``end_ms`` (None: its sweep ends it)."""
    from mlflow.entities import Metric, RunTag  # noqa: PLC0415 (mlflow: loaded meanwhile, see _track_run)

    now = int(time.time() * 1000)
    client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
                     tags=[RunTag(k, str(v)) for k, v in tags.items()])
    if end_ms is not None:
        client.set_terminated(run_id, "FINISHED", end_time=end_ms)


def _param(v: Any) -> str:
    """Return a param's value as MLflow stores it: text (JSON for the rest), redacted, at most 6000 characters."""
    text = redact(v if isinstance(v, str) else canonical_json(v))
    return text if len(text) <= 6000 else text[:5990] + "…"


def _grid(t: RunTables, rec: RunRecords) -> dict[str, Any]:
    """Return the sweep-level params (judges, scenario set) and their hash (a changed grid is a new MLflow run)."""
    judges = (t.judgments.select("judge", "judge_model", "rubric", "mode").unique().sort("judge").to_dicts())
    hashes = rec.rubric_hashes
    params: dict[str, Any] = {"scenario_set_hash": content_hash(sorted(t.scenarios)), "scenarios": len(t.scenarios),
                              "cells": t.candidates["cell"].n_unique()}
    for j in judges:
        params[f"judge.{j['judge']}.model"] = j["judge_model"]
        params[f"judge.{j['judge']}.rubric"] = j["rubric"]
        params[f"judge.{j['judge']}.rubric_hash"] = hashes.get(j["rubric"], "")
        params[f"judge.{j['judge']}.mode"] = j["mode"]
    params["cell_list"] = sorted(t.candidates["cell"].unique().to_list())
    # hashed in the packed mode's words before its rename (hashed_mode): a run tracked then keeps its MLflow run
    hashed = {k: hashed_mode(v, {})[0] if k.endswith(".mode") else v for k, v in params.items()}
    return {"params": params, "hash": content_hash(hashed, 12)}


def _cell_params(rec: RunRecords, cell: str) -> dict[str, Any]:
    """Return a cell's own params: its model, prompt (with hash) and generation params."""
    c = next(c for c in rec.candidates.values() if rec.cell[c.id] == cell)
    out: dict[str, Any] = {"model_id": c.model_id, "model": c.model, "prompt": c.prompt_key,
                           "prompt_hash": c.prompt_hash}
    out.update({f"gen.{k}": v for k, v in sorted(c.params.items())})
    return out


def _log_artifacts(client: Any, run_id: str, run_dir: Path, report: Path | None) -> None:
    """Log the run's records, executed notebooks and report on the parent run."""
    for path in sorted(run_dir.glob("*.jsonl")):
        client.log_artifact(run_id, str(path), artifact_path="records")
    if (run_dir / "notebooks").is_dir():
        client.log_artifacts(run_id, str(run_dir / "notebooks"), artifact_path="notebooks")
    if report is not None and report.exists():
        client.log_artifact(run_id, str(report), artifact_path="report")
