"""`bench align`'s MLflow run: a judge aligned from a run's reviews, in that run's store (``bench.level =
alignment``), its kappas as metrics and its rubric as an artifact; a failure is a warning."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.core.records import canonical_json
from bench.tracking._console import warn
from bench.tracking._metrics import _clean
from bench.tracking.comparisons import _children, sweep_run_id
from bench.tracking.mlflow_store import mlflow_client

LEVEL = "alignment"


def log_alignment(run_dir: str | Path, doc: dict[str, Any], artifacts: list[Path]) -> str | None:
    """Log one alignment (`bench align`'s JSON ``doc``) with ``artifacts``; return its run id, None on failure."""
    try:
        return _log(Path(run_dir), doc, artifacts)
    except Exception as err:  # tracking is never fatal
        warn(f"MLflow logging of the alignment of judge {doc.get('judge')}", err)
        return None


def alignment_metrics(doc: dict[str, Any]) -> dict[str, float]:
    """Return the metrics of an alignment document: before, after, each variant's kappa and interval, counts."""
    out: dict[str, Any] = {"reviewed_answers": doc["reviewed_answers"], "folds": doc["k"],
                           "calls": doc["usage"]["calls"], "cache_hits": doc["usage"]["cache_hits"],
                           "cost_usd": doc["usage"]["cost_usd"]}
    for name in ("before", "after"):
        got = doc.get(name) or {}
        out.update({f"kappa_{name}": got.get("kappa"), f"kappa_{name}.ci_low": got.get("ci_low"),
                    f"kappa_{name}.ci_high": got.get("ci_high")})
    for kind, v in doc["variants"].items():
        got = v.get("agreement") or {}
        out.update({f"variant.{kind}.kappa": got.get("kappa"), f"variant.{kind}.ci_low": got.get("ci_low"),
                    f"variant.{kind}.ci_high": got.get("ci_high")})
    return _clean(out)


def _log(run_dir: Path, doc: dict[str, Any], artifacts: list[Path]) -> str:
    from mlflow.entities import Metric, Param, RunTag  # noqa: PLC0415 (mlflow: 2 s, loaded by mlflow_client already)

    name = run_dir.name
    client, exp_id = mlflow_client(run_dir, name)
    tags = {"bench.level": LEVEL, "bench.align.judge": doc["judge"], "bench.align.source": doc["source"],
            "bench.align.variant": doc["chosen"], "bench.align.rubric": doc.get("written") or "",
            "bench.align.key": doc["key"]}
    parent = sweep_run_id(run_dir, name)
    if parent:
        tags["mlflow.parentRunId"] = parent
    found = _children(client, exp_id, f"tags.`bench.level` = '{LEVEL}'", "bench.align.key")
    run_id = found.get(doc["key"]) or client.create_run(exp_id, tags=tags,
                                                        run_name=f"align {doc['judge']}").info.run_id
    params = {k: canonical_json(v) if isinstance(v, (dict, list)) else str(v) for k, v in doc["settings"].items()}
    now = int(time.time() * 1000)
    client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in alignment_metrics(doc).items()],
                     params=[Param(k, v) for k, v in params.items()], tags=[RunTag(k, v) for k, v in tags.items()])
    for path in artifacts:
        if path.exists():
            client.log_artifact(run_id, str(path), artifact_path="alignment")
    client.set_terminated(run_id, "FINISHED")
    return run_id
