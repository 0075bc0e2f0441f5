"""MLflow tracking of a run (the only module that imports mlflow).

``track_run`` logs one parent MLflow run per sweep and one child run per (model, prompt) cell:
params (model, generation params, prompt id@version, judges' models and rubric id@version and
hash, the scenario set's hash), metrics (per-criterion means with CI bounds, composite, n,
failure rates, cost, tokens, latency p50/p95), tags (stage status) and, on the parent, the run's
records, executed notebooks and report as artifacts. Each answer is an MLflow trace (the
model call: messages in, answer out) with every judge's scores as assessments; ``log_reviews``
adds human reviews as assessments whose source is the reviewer.

The store defaults to ``sqlite:///<run folder>/mlflow.db`` with artifacts in
``<run folder>/mlartifacts``; ``MLFLOW_TRACKING_URI`` points a team at a tracking server.
Re-tracking a run updates the same MLflow runs (a changed grid gets new ones) and logs only
new traces and assessments. Tracking never stops a sweep: a failure prints a warning.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from .records import canonical_json, content_hash
from .secrets import redact
from .store import atomic_write

STATE = ".mlflow-state.json"  # what has been logged where: candidate → trace id, logged assessments
MAX_TRACES = int(os.environ.get("BENCH_MLFLOW_MAX_TRACES", "2000"))  # answers traced per run (the rest: metrics)


def tracking_uri(run_dir: str | Path) -> str:
    """Return ``$MLFLOW_TRACKING_URI`` or the run folder's own sqlite store."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(run_dir).resolve() / 'mlflow.db'}"


def _mlflow(run_dir: Path, name: str) -> Any:
    """Import mlflow quietly, point it at the run's store and experiment ``bench/<sweep>``; return the module."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mlflow  # noqa: PLC0415
    import logging  # noqa: PLC0415

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    local = "MLFLOW_TRACKING_URI" not in os.environ
    mlflow.set_tracking_uri(tracking_uri(run_dir))
    if local:  # mlflow exports the URI it is given; keep the environment saying "the run's own store"
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    exp_name = f"bench/{name}"
    if mlflow.get_experiment_by_name(exp_name) is None:
        mlflow.create_experiment(exp_name, artifact_location=(run_dir.resolve() / "mlartifacts").as_uri()
                                 if local else None)
    mlflow.set_experiment(exp_name)
    return mlflow


def _warn(what: str, err: BaseException) -> None:
    text = redact(str(err))  # an error may quote a tracking URI's user:password@
    print(f"tracking: {what} failed ({type(err).__name__}: {text.splitlines()[0][:300] if text else ''}); "
          f"the run's records are unaffected", file=sys.stderr, flush=True)


def track_run(run_dir: str | Path, *, status: dict[str, str] | None = None, report: str | Path | None = None,
              resamples: int = 1000) -> str | None:
    """Log a run folder to MLflow; return the parent MLflow run id, or None if tracking failed (warned)."""
    run_dir = Path(run_dir)
    try:
        return _track_run(run_dir, status or {}, Path(report) if report else None, resamples)
    except Exception as err:  # tracking is never fatal
        _warn(f"MLflow logging of {run_dir}", err)
        return None


def _track_run(run_dir: Path, status: dict[str, str], report: Path | None, resamples: int) -> str:
    from .analysis import summarize  # noqa: PLC0415

    s = summarize(run_dir, resamples=resamples)
    t = s.tables
    mlflow = _mlflow(run_dir, t.name)
    grid = _grid(t)
    parent = _find_or_start(mlflow, {"bench.sweep": t.name, "bench.level": "sweep", "bench.grid": grid["hash"]},
                            run_name=t.name, params=grid["params"])
    with mlflow.start_run(run_id=parent):
        mlflow.set_tags({f"bench.stage.{k}": v for k, v in status.items()})
        mlflow.set_tag("bench.outcome", "failed items" if not s.failures.is_empty() else "ok")
        mlflow.log_metrics(_sweep_metrics(s))
        for cell in t.candidates["cell"].unique().sort().to_list():
            child = _find_or_start(mlflow, {"bench.sweep": t.name, "bench.level": "cell", "bench.cell": cell,
                                            "bench.grid": grid["hash"]}, run_name=cell,
                                   params={**grid["params"], **_cell_params(t, cell)}, nested=True)
            with mlflow.start_run(run_id=child, nested=True):
                mlflow.set_tags({f"bench.stage.{k}": v for k, v in status.items()})
                mlflow.log_metrics(_cell_metrics(s, cell))
        _log_artifacts(mlflow, run_dir, report)
    _log_traces(mlflow, run_dir, t)
    return parent


def _find_or_start(mlflow: Any, tags: dict[str, str], run_name: str, params: dict[str, Any], nested: bool = False) -> str:
    """Return the id of the MLflow run with these tags, creating it (with its params) if there is none."""
    query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
    found = mlflow.search_runs(filter_string=query, max_results=1, output_format="list")
    if found:
        return found[0].info.run_id
    active = mlflow.active_run()
    with mlflow.start_run(run_name=run_name, tags=tags, nested=nested and active is not None) as r:
        mlflow.log_params({k: _param(v) for k, v in params.items()})
        return r.info.run_id


def _param(v: Any) -> str:
    text = redact(v if isinstance(v, str) else canonical_json(v))
    return text if len(text) <= 6000 else text[:5990] + "…"


def _grid(t: Any) -> dict[str, Any]:
    """Return the sweep-level params (judges, scenario set) and their hash (a changed grid is a new MLflow run)."""
    judges = (t.judgments.select("judge", "judge_model", "rubric", "mode").unique().sort("judge").to_dicts())
    hashes = {f"{r.rubric_id}@{r.rubric_version}": r.rubric_hash for r in _judgment_records(t)}
    params: dict[str, Any] = {"scenario_set_hash": content_hash(sorted(t.scenarios)), "scenarios": len(t.scenarios),
                              "cells": t.candidates["cell"].n_unique()}
    for j in judges:
        params[f"judge.{j['judge']}.model"] = j["judge_model"]
        params[f"judge.{j['judge']}.rubric"] = j["rubric"]
        params[f"judge.{j['judge']}.rubric_hash"] = hashes.get(j["rubric"], "")
        params[f"judge.{j['judge']}.mode"] = j["mode"]
    params["cell_list"] = sorted(t.candidates["cell"].unique().to_list())
    return {"params": params, "hash": content_hash(params, 12)}


def _judgment_records(t: Any) -> list[Any]:
    from .records import Judgment  # noqa: PLC0415
    from .store import RunStore  # noqa: PLC0415

    seen, out = set(), []
    for j in RunStore(t.run_dir).iter(Judgment):
        if j.rubric_hash not in seen:
            seen.add(j.rubric_hash)
            out.append(j)
    return out


def _cell_params(t: Any, cell: str) -> dict[str, Any]:
    import polars as pl  # noqa: PLC0415

    from .records import Candidate  # noqa: PLC0415
    from .store import RunStore  # noqa: PLC0415

    ids = set(t.candidates.filter(pl.col("cell") == cell)["id"].to_list())
    c = next(c for c in RunStore(t.run_dir).iter(Candidate) if c.id in ids)
    out: dict[str, Any] = {"model_id": c.model_id, "model": c.model, "prompt": f"{c.prompt_id}@{c.prompt_version}",
                           "prompt_hash": c.prompt_hash}
    out.update({f"gen.{k}": v for k, v in sorted(c.params.items())})
    return out


def _clean(metrics: dict[str, Any]) -> dict[str, float]:
    import math  # noqa: PLC0415

    return {k.replace("@", "_at_"): float(v) for k, v in metrics.items()
            if v is not None and not (isinstance(v, float) and math.isnan(v))}


def _cell_metrics(s: Any, cell: str) -> dict[str, float]:
    import polars as pl  # noqa: PLC0415

    m: dict[str, Any] = {}
    for r in s.board.filter(pl.col("cell") == cell).iter_rows(named=True):
        for stat in ("mean", "ci_low", "ci_high"):
            m[f"{r['judge']}.{r['criterion']}.{stat}"] = r[stat]
        m[f"{r['judge']}.n"] = r["n"]
    for r in s.overview.filter(pl.col("cell") == cell).iter_rows(named=True):
        m["answer_failure_rate"] = r["answer_failure_rate"]
        m[f"{r['judge']}.judge_failure_rate"] = r["judge_failure_rate"]
    for r in s.win_rates.filter(pl.col("cell") == cell).iter_rows(named=True):
        m[f"{r['judge']}.win_rate"], m[f"{r['judge']}.win_rate.ci_low"], m[f"{r['judge']}.win_rate.ci_high"] = \
            r["win_rate"], r["ci_low"], r["ci_high"]
    for r in s.usage_cells.filter(pl.col("cell") == cell).iter_rows(named=True):
        for k in ("calls", "cache_hits", "failed_records", "prompt_tokens", "completion_tokens", "cost_usd",
                  "latency_p50_s", "latency_p95_s"):
            m[f"answers.{k}"] = r[k]
    return _clean(m)


def _sweep_metrics(s: Any) -> dict[str, float]:
    m: dict[str, Any] = {"answers": s.tables.candidates.height, "judgments": s.tables.judgments.height}
    for r in s.usage_judges.iter_rows(named=True):
        for k in ("calls", "cache_hits", "failed_records", "prompt_tokens", "completion_tokens", "cost_usd",
                  "latency_p50_s", "latency_p95_s"):
            m[f"judge.{r['judge']}.{k}"] = r[k]
    for r in s.health.iter_rows(named=True):
        m[f"judge.{r['judge']}.parse_failure_rate"] = r["parse_failure_rate"]
        m[f"judge.{r['judge']}.null_rate"] = r["null_rate"]
    m["failed_items"] = int(s.failures["count"].sum()) if not s.failures.is_empty() else 0
    for r in s.failures.iter_rows(named=True):  # the same groups as the sweep's closing summary
        m[f"failed.{r['stage']}.{r['who']}.{r['kind']}"] = r["count"]
    return _clean(m)


def _log_artifacts(mlflow: Any, run_dir: Path, report: Path | None) -> None:
    for path in sorted(run_dir.glob("*.jsonl")):
        mlflow.log_artifact(str(path), artifact_path="records")
    if (run_dir / "notebooks").is_dir():
        mlflow.log_artifacts(str(run_dir / "notebooks"), artifact_path="notebooks")
    if report is not None and report.exists():
        mlflow.log_artifact(str(report), artifact_path="report")


# -- traces and assessments ---------------------------------------------------------------------------
def _state(run_dir: Path) -> dict[str, Any]:
    path = run_dir / STATE
    uri = redact(tracking_uri(run_dir))  # kept in the run folder: never a user:password@
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        state = {}
    if state.get("uri") != uri:  # another store: start over there
        state = {"uri": uri, "traces": {}, "assessed": []}
    return state


def _save_state(run_dir: Path, state: dict[str, Any]) -> None:
    atomic_write(run_dir / STATE, json.dumps(state).encode())


def _log_traces(mlflow: Any, run_dir: Path, t: Any) -> None:
    """Log each answer as a trace (up to MAX_TRACES) and each judge's scores of it as assessments."""
    from mlflow.entities import AssessmentSource  # noqa: PLC0415

    from .records import Candidate, Judgment  # noqa: PLC0415
    from .store import RunStore  # noqa: PLC0415

    state = _state(run_dir)
    store = RunStore(run_dir)
    for c in store.latest(Candidate).values():
        if c.ok and c.id not in state["traces"] and len(state["traces"]) < MAX_TRACES:
            state["traces"][c.id] = _answer_trace(mlflow, c)
    mlflow.flush_trace_async_logging()
    assessed = set(state["assessed"])
    for j in store.latest(Judgment).values():
        trace = state["traces"].get(j.candidate_ids[0])
        if not j.ok or j.id in assessed or trace is None:
            continue
        source = AssessmentSource(source_type="LLM_JUDGE", source_id=j.judge_model)
        values = dict(j.scores or {}) if j.mode != "pairwise" else {"verdict": j.verdict}
        if j.score is not None:
            values["composite"] = j.score
        for name, value in values.items():
            mlflow.log_feedback(trace_id=trace, name=f"{j.judge_id}.{name}", value=value, source=source,
                                rationale=(j.rationale or "")[:4000] or None,
                                metadata={"judgment_id": j.id, "mode": j.mode, "order": j.order or ""})
        assessed.add(j.id)
    state["assessed"] = sorted(assessed)
    _save_state(run_dir, state)


def _answer_trace(mlflow: Any, c: Any) -> str:
    """Log one answer as a trace: an LLM span from the request to the reply, at its recorded time."""
    from datetime import datetime  # noqa: PLC0415

    cell = f"{c.model_id}/{c.prompt_id}@{c.prompt_version}"
    latency = (c.usage.latency_s or 0.0) if c.usage else 0.0
    end_ns = int(datetime.fromisoformat(c.created_at).timestamp() * 1e9)
    span = mlflow.start_span_no_context(
        name=cell, span_type="LLM", inputs={"messages": c.messages}, start_time_ns=end_ns - int(latency * 1e9),
        attributes={"model": c.model, "params": canonical_json(c.params), "scenario_id": c.scenario_id,
                    "candidate_id": c.id},
        tags={"bench.candidate": c.id, "bench.cell": cell})
    span.set_outputs(c.output)
    span.end(end_time_ns=end_ns)
    return span.trace_id


def log_reviews(run_dir: str | Path, reviews: list[Any]) -> int:
    """Log human reviews as assessments (source: the reviewer) on their answers' traces; return how many.

    Does nothing when the run was never tracked (no trace to attach to); warns on failure.
    """
    run_dir = Path(run_dir)
    state = _state(run_dir)
    todo = [r for r in reviews if state["traces"].get(r.candidate_ids[0] if r.candidate_ids else "")]
    if not todo:
        return 0
    try:
        from mlflow.entities import AssessmentSource  # noqa: PLC0415

        from .records import Judgment  # noqa: PLC0415
        from .store import RunStore  # noqa: PLC0415

        judges = {j.id: j.judge_id for j in RunStore(run_dir).iter(Judgment)}
        mlflow = _mlflow(run_dir, run_dir.name)
        for r in todo:
            values = dict(r.scores or {}) if r.verdict is None else {"verdict": r.verdict}
            if r.score is not None:
                values["composite"] = r.score
            for name, value in values.items():
                mlflow.log_feedback(trace_id=state["traces"][r.candidate_ids[0]],
                                    name=f"{judges.get(r.judgment_id, 'judge')}.{name}", value=value,
                                    source=AssessmentSource(source_type="HUMAN", source_id=r.reviewer),
                                    rationale=r.note or None, metadata={"review_id": r.id, "judgment_id": r.judgment_id})
        return len(todo)
    except Exception as err:
        _warn("MLflow logging of reviews", err)
        return 0
