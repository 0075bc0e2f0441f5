"""`bench compare`'s MLflow run: the comparison of two runs, in run B's store (``bench.level = comparison``), a
child run per cell pair and the diff report as an artifact; a failure is only a warning."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from bench.compare.comparison import Comparison
from bench.core.records import canonical_json, content_hash
from bench.tracking._console import warn
from bench.tracking._metrics import _clean
from bench.tracking.mlflow_store import mlflow_client, shown_uri, store_ready, tracking_uri

LEVEL = "comparison"
ROW_METRICS = ("diff", "ci_low", "ci_high", "p_value", "p_holm", "n_matched", "n_changed", "mean_a", "mean_b")


def log_comparison(cmp: Comparison, report: str | Path | None = None) -> str | None:
    """Log a comparison to run B's MLflow store; return the comparison's MLflow run id, None if logging failed."""
    try:
        return _log(cmp, Path(report) if report else None)
    except Exception as err:  # tracking is never fatal
        warn(f"MLflow logging of the comparison {cmp.name}", err)
        return None


def sweep_run_id(run_dir: Path, name: str) -> str | None:
    """Return the MLflow id of a run folder's latest sweep run if the run was tracked, else None (no store is made)."""
    if "MLFLOW_TRACKING_URI" not in os.environ and not (Path(run_dir) / "mlflow.db").exists():
        return None
    client = store_ready(run_dir).MlflowClient(tracking_uri(run_dir))
    exp = client.get_experiment_by_name(f"bench/{name}")
    if exp is None:
        return None
    # the name is compared here, never spliced into MLflow's filter language (a folder can be called anything)
    for r in client.search_runs([exp.experiment_id], filter_string="tags.`bench.level` = 'sweep'",
                                order_by=["attributes.start_time DESC"], max_results=1000):
        if r.data.tags.get("bench.sweep") == name:
            return r.info.run_id
    return None


def _log(cmp: Comparison, report: Path | None) -> str:
    dir_a, dir_b = (Path(t.run_dir) for t in (cmp.tables_a, cmp.tables_b))
    parent_a, parent_b = sweep_run_id(dir_a, cmp.run_a), sweep_run_id(dir_b, cmp.run_b)
    client, exp_id = mlflow_client(dir_b, cmp.run_b)
    key = content_hash({"a": cmp.run_a, "b": cmp.run_b, "settings": cmp.settings}, 12)
    tags = {"bench.level": LEVEL, "bench.compare.a": cmp.run_a, "bench.compare.b": cmp.run_b, "bench.compare.key": key,
            "bench.compare.a_store": shown_uri(tracking_uri(dir_a))}
    if parent_a:
        tags["bench.compare.a_run_id"] = parent_a
    if parent_b:
        tags.update({"bench.compare.b_run_id": parent_b, "mlflow.parentRunId": parent_b})
    found = _children(client, exp_id, "tags.`bench.level` = 'comparison'", "bench.compare.key")
    run_id = found.get(key) or client.create_run(exp_id, tags=tags, run_name=f"{cmp.run_a} vs {cmp.run_b}").info.run_id
    params = {k: canonical_json(v) if isinstance(v, (dict, list)) else str(v) for k, v in cmp.settings.items()}
    summary = cmp.to_json()["counts"]
    _batch(client, run_id, {k: v for k, v in summary.items()} | {"warnings": len(cmp.warnings)}, tags, params)
    _log_pairs(client, exp_id, run_id, cmp)
    data = (report.parent / "comparison.json") if report is not None else None
    for path in (report, data):
        if path is not None and path.exists():
            client.log_artifact(run_id, str(path), artifact_path="comparison")
    client.set_terminated(run_id, "FINISHED")
    return run_id


def _log_pairs(client: Any, exp_id: str, run_id: str, cmp: Comparison) -> None:
    """Log one child run per compared cell pair with its rows' differences and its pairwise win rates."""
    found = _children(client, exp_id, f"tags.`mlflow.parentRunId` = '{run_id}'", "bench.compare.cells")
    metrics: dict[tuple[str, str], dict[str, Any]] = {}
    for r in cmp.rows.iter_rows(named=True):
        got = metrics.setdefault((r["cell_a"], r["cell_b"]), {})
        got.update({f"judge.{r['judge']}.{r['criterion']}.{m}": r[m] for m in ROW_METRICS})
    for r in cmp.pairwise.iter_rows(named=True):
        got = metrics.setdefault((r["cell_a"], r["cell_b"]), {})
        got.update({f"judge.{r['judge']}.win_rate_b{suffix}": r[m] for m, suffix in
                    (("win_rate_b", ""), ("ci_low", ".ci_low"), ("ci_high", ".ci_high"), ("n", ".n"))})
    for (cell_a, cell_b), values in sorted(metrics.items()):
        cells = f"{cell_a} -> {cell_b}"
        tags = {"bench.level": f"{LEVEL}.cells", "bench.compare.cells": cells, "bench.cell_a": cell_a,
                "bench.cell_b": cell_b, "mlflow.parentRunId": run_id}
        child = found.get(cells) or client.create_run(exp_id, tags=tags, run_name=cells).info.run_id
        _batch(client, child, values, tags, {})
        client.set_terminated(child, "FINISHED")


def _children(client: Any, exp_id: str, query: str, tag: str) -> dict[str, str]:
    """Return {value of ``tag``: run id} of the runs ``query`` finds (newest first wins)."""
    out: dict[str, str] = {}
    for r in client.search_runs([exp_id], filter_string=query, max_results=10000):
        out.setdefault(r.data.tags.get(tag, ""), r.info.run_id)
    return out


def _batch(client: Any, run_id: str, metrics: dict[str, Any], tags: dict[str, str], params: dict[str, str]) -> None:
    """Log metrics (None and NaN left out), tags and params in one batch."""
    from mlflow.entities import Metric, Param, RunTag  # noqa: PLC0415 (mlflow: 2 s, loaded by mlflow_client already)

    now = int(time.time() * 1000)
    client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in _clean(metrics).items()],
                     params=[Param(k, v) for k, v in params.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])  # a parent run tracked since: nested now
