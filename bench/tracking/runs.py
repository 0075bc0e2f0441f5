"""MLflow tracking of a run (the only module that imports mlflow).

``track_run`` logs one parent MLflow run per sweep and one child run per (model, prompt) cell:
params (model, generation params, prompt id@version, judges' models and rubric id@version and
hash, the scenario set's hash), metrics, tags (stage status) and, on the parent, the run's
records, executed notebooks and report as artifacts. Each answer is an MLflow trace (the
model call: messages in, answer out) with every judge's scores as assessments; ``log_reviews``
adds human reviews as assessments whose source is the reviewer.

Metric names are the same on both levels (the parent counts the whole sweep, a child its
cell): ``answers.<metric>`` (n, failure_rate, calls, cache_hits, failed_records, tokens,
cost_usd, latency_p50_s/p95_s) and ``judge.<id>.<metric>`` (n, failure_rate, the same usage,
parse_failure_rate, null_rate); a child adds ``judge.<id>.<criterion>.mean|ci_low|ci_high|n``
and ``judge.<id>.win_rate[.ci_low|.ci_high]``; the parent adds ``failed_items`` and
``failed.<stage>.<who>.<kind>``. A child run starts and ends at its cell's first and last
record, the parent at the sweep's.

Writes are batched: each run's metrics, params and tags in one ``log_batch``; each new trace
is written with its assessments in one call, and the spans of a few hundred traces in one
``log_spans``. Trace and assessment ids derive from the experiment and the records, so a
re-track after an interrupted one rewrites rather than duplicates. A line every few seconds
says what tracking is doing.

The store defaults to ``sqlite:///<run folder>/mlflow.db`` with artifacts in
``<run folder>/mlartifacts``; ``MLFLOW_TRACKING_URI`` points a team at a tracking server.
Re-tracking a run updates the same MLflow runs (a changed grid gets new ones) and logs only
new traces and assessments. Tracking never stops a sweep: a failure prints a warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.core.records import canonical_json, content_hash
from bench.core.secrets import redact
from bench.core.store import atomic_write, latest_of

STATE = ".mlflow-state.json"  # what has been logged where: candidate → trace id, logged assessments
MAX_TRACES = int(os.environ.get("BENCH_MLFLOW_MAX_TRACES", "2000"))  # answers traced per run (the rest: metrics)
TRACE_BATCH = 250  # traces per write batch (one log_spans call; the state file is saved after each)
PROGRESS_EVERY_S = float(os.environ.get("BENCH_TRACKING_PROGRESS_S", "3"))  # a progress line after this much quiet
USAGE = ("calls", "cache_hits", "failed_records", "prompt_tokens", "completion_tokens", "cost_usd", "latency_p50_s",
         "latency_p95_s")


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


def _client(run_dir: Path, name: str) -> tuple[Any, str]:
    """Import mlflow quietly; return a client of the run's store and the id of experiment ``bench/<sweep>``.

    Only clients bound to the URI are used (no ``mlflow.set_tracking_uri``): the process's
    environment and mlflow's global state stay as they were.
    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from mlflow import MlflowClient  # noqa: PLC0415
    import logging  # noqa: PLC0415

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    client = MlflowClient(tracking_uri(run_dir))
    exp_name = f"bench/{name}"
    exp = client.get_experiment_by_name(exp_name)
    if exp is not None:
        return client, exp.experiment_id
    local = "MLFLOW_TRACKING_URI" not in os.environ
    return client, client.create_experiment(exp_name, artifact_location=(run_dir.resolve() / "mlartifacts").as_uri()
                                            if local else None)


class _Progress:
    """Say what tracking is doing: after ``every_s`` seconds without a line, one line (from a daemon thread).

    ``tracking: traces 400/1000 (7s)``; a step without a count reads ``tracking: <step> … (3s)``.
    Nothing is printed when tracking is quicker than ``every_s``.
    """

    def __init__(self, every_s: float = PROGRESS_EVERY_S):
        self.every_s, self.step, self.done, self.total = every_s, "starting", 0, 0
        self._t0 = self._last = time.monotonic()
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._tick, name="bench-tracking-progress", daemon=True)

    def __enter__(self) -> "_Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def begin(self, step: str, total: int = 0) -> None:
        with self._lock:
            self.step, self.done, self.total = step, 0, total

    def add(self, n: int) -> None:
        with self._lock:
            self.done += n

    def line(self) -> str:
        with self._lock:
            count = f" {self.done}/{self.total}" if self.total else " …"
            return f"tracking: {self.step}{count} ({time.monotonic() - self._t0:.0f}s)"

    def _tick(self) -> None:
        while not self._stop.wait(min(0.25, self.every_s)):
            if time.monotonic() - self._last >= self.every_s:
                self._last = time.monotonic()
                print(self.line(), flush=True)


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
    from bench.analysis import summarize  # noqa: PLC0415

    with _Progress() as progress:
        progress.begin("reading the run and opening the MLflow store")
        with ThreadPoolExecutor(1, thread_name_prefix="bench-tracking-store") as pool:
            store = pool.submit(_client, run_dir, run_dir.name)  # mlflow's import and a new store's tables meanwhile
            s = summarize(run_dir, resamples=resamples)
            t = s.tables
            rec = _Records(run_dir)
            client, exp_id = store.result()
        cells = t.candidates["cell"].unique().sort().to_list()
        progress.begin("runs", 1 + len(cells))
        grid = _grid(t, rec)
        runs = _runs(client, exp_id, t.name, grid["hash"])
        stages = {f"bench.stage.{k}": v for k, v in status.items()}
        parent = runs.get(None) or _create_run(
            client, exp_id, {"bench.sweep": t.name, "bench.level": "sweep", "bench.grid": grid["hash"]}, t.name,
            grid["params"], rec.start_ms(None))
        _log_run(client, parent, _sweep_metrics(s),
                 {**stages, "bench.outcome": "failed items" if not s.failures.is_empty() else "ok"}, rec.end_ms(None))
        progress.add(1)
        for cell in cells:
            child = runs.get(cell) or _create_run(
                client, exp_id, {"bench.sweep": t.name, "bench.level": "cell", "bench.cell": cell,
                                 "bench.grid": grid["hash"], "mlflow.parentRunId": parent}, cell,
                {**grid["params"], **_cell_params(rec, cell)}, rec.start_ms(cell))
            runs[cell] = child
            _log_run(client, child, _cell_metrics(s, cell), stages, rec.end_ms(cell))
            progress.add(1)
        progress.begin("artifacts")
        _log_artifacts(client, parent, run_dir, report)
        _log_traces(client, exp_id, run_dir, rec, runs, progress)
    return parent


class _Records:
    """A run's answers and judgments, read once: the latest record per id, each answer's cell, record times."""

    def __init__(self, run_dir: Path):
        from bench.analysis.tables import cell_key  # noqa: PLC0415
        from bench.core.records import Candidate, Judgment  # noqa: PLC0415
        from bench.core.store import RunStore  # noqa: PLC0415

        store = RunStore(run_dir)
        every_candidate, every_judgment = store.read(Candidate), store.read(Judgment)
        self.candidates, self.judgments = latest_of(every_candidate), latest_of(every_judgment)
        self.cell = {c.id: cell_key(c.model_id, f"{c.prompt_id}@{c.prompt_version}") for c in self.candidates.values()}
        firsts: dict[str, Any] = {}  # the first judgment of each rubric hash, in file order
        for j in every_judgment:
            firsts.setdefault(j.rubric_hash, j)
        self.rubric_hashes = {f"{j.rubric_id}@{j.rubric_version}": j.rubric_hash for j in firsts.values()}
        self._times: dict[str | None, list[int]] = {}
        for r in [*every_candidate, *every_judgment]:
            ms = _ms(r.created_at)
            ids = [r.id] if isinstance(r, Candidate) else r.candidate_ids  # a pairwise judgment: both answers' cells
            for key in {None, *(self.cell[i] for i in ids if i in self.cell)}:
                span = self._times.setdefault(key, [ms, ms])
                span[0], span[1] = min(span[0], ms), max(span[1], ms)

    def start_ms(self, cell: str | None) -> int:
        """Return the time of the first record (every attempt counts) of a cell, or of the sweep (None)."""
        return self._times.get(cell, [int(time.time() * 1000)] * 2)[0]

    def end_ms(self, cell: str | None) -> int:
        """Return the time of the last record of a cell, or of the sweep (None)."""
        return self._times.get(cell, [int(time.time() * 1000)] * 2)[1]


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


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
    from mlflow.entities import Param  # noqa: PLC0415

    run_id = client.create_run(exp_id, start_time=start_ms, tags=tags, run_name=name).info.run_id
    client.log_batch(run_id, params=[Param(k, _param(v)) for k, v in params.items()])
    return run_id


def _log_run(client: Any, run_id: str, metrics: dict[str, float], tags: dict[str, str], end_ms: int) -> None:
    """Log a run's metrics and tags in one batch (mlflow splits it at its limits) and end it at ``end_ms``."""
    from mlflow.entities import Metric, RunTag  # noqa: PLC0415

    now = int(time.time() * 1000)
    client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
                     tags=[RunTag(k, str(v)) for k, v in tags.items()])
    client.set_terminated(run_id, "FINISHED", end_time=end_ms)


def _param(v: Any) -> str:
    text = redact(v if isinstance(v, str) else canonical_json(v))
    return text if len(text) <= 6000 else text[:5990] + "…"


def _grid(t: Any, rec: _Records) -> dict[str, Any]:
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
    return {"params": params, "hash": content_hash(params, 12)}


def _cell_params(rec: _Records, cell: str) -> dict[str, Any]:
    c = next(c for c in rec.candidates.values() if rec.cell[c.id] == cell)
    out: dict[str, Any] = {"model_id": c.model_id, "model": c.model, "prompt": f"{c.prompt_id}@{c.prompt_version}",
                           "prompt_hash": c.prompt_hash}
    out.update({f"gen.{k}": v for k, v in sorted(c.params.items())})
    return out


def _clean(metrics: dict[str, Any]) -> dict[str, float]:
    import math  # noqa: PLC0415

    return {k.replace("@", "_at_"): float(v) for k, v in metrics.items()
            if v is not None and not (isinstance(v, float) and math.isnan(v))}


def _scope_metrics(s: Any, cell: str | None) -> dict[str, Any]:
    """Return ``answers.*`` and ``judge.<id>.*`` of the whole sweep (``cell`` None) or of one cell: the same
    names on both levels. Usage counts every attempt (what was paid for); n and failure_rate the latest record
    of each item. A pairwise judgment belongs to the cells of both its answers."""
    import polars as pl  # noqa: PLC0415

    from bench.analysis.reliability import judge_health  # noqa: PLC0415
    from bench.analysis.usage import usage_by_cell, usage_by_judge  # noqa: PLC0415

    t = s.tables
    in_cell = (lambda f: f) if cell is None else (lambda f: f.filter(pl.col("cell") == cell))  # noqa: E731
    judged = (lambda f: f) if cell is None else (  # noqa: E731
        lambda f: f.filter((pl.col("cell") == cell) | (pl.col("cell_b") == cell)))
    answers = in_cell(t.candidates)
    m: dict[str, Any] = {"answers.n": answers.height}
    if answers.height:
        m["answers.failure_rate"] = answers["error"].is_not_null().mean()
    attempts = in_cell(t.candidate_attempts if t.candidate_attempts is not None else t.candidates)
    if attempts.height:
        one = pl.lit("")  # one group: the whole scope
        usage = usage_by_cell(attempts.with_columns(one.alias("cell"), one.alias("model"), one.alias("prompt")))
        m.update({f"answers.{k}": usage[k][0] for k in USAGE})
    judgments = judged(t.judgments)
    for r in (judgments.group_by("judge").agg(pl.len().alias("n"), pl.col("error").is_not_null().mean().alias("fr"))
              .iter_rows(named=True)):
        m[f"judge.{r['judge']}.n"], m[f"judge.{r['judge']}.failure_rate"] = r["n"], r["fr"]
    for r in usage_by_judge(judged(t.judgment_attempts if t.judgment_attempts is not None else t.judgments)
                            ).iter_rows(named=True):
        m.update({f"judge.{r['judge']}.{k}": r[k] for k in USAGE})
    for r in judge_health(judgments).iter_rows(named=True):
        m[f"judge.{r['judge']}.parse_failure_rate"] = r["parse_failure_rate"]
        m[f"judge.{r['judge']}.null_rate"] = r["null_rate"]
    return m


def _cell_metrics(s: Any, cell: str) -> dict[str, float]:
    """Return a cell's metrics: the scope metrics, each criterion's mean with its CI and n, pairwise win rates."""
    import polars as pl  # noqa: PLC0415

    m = _scope_metrics(s, cell)
    for r in s.board.filter(pl.col("cell") == cell).iter_rows(named=True):
        for stat in ("mean", "ci_low", "ci_high", "n"):
            m[f"judge.{r['judge']}.{r['criterion']}.{stat}"] = r[stat]
    for r in s.win_rates.filter(pl.col("cell") == cell).iter_rows(named=True):
        for stat, key in (("win_rate", ""), ("ci_low", ".ci_low"), ("ci_high", ".ci_high")):
            m[f"judge.{r['judge']}.win_rate{key}"] = r[stat]
    return _clean(m)


def _sweep_metrics(s: Any) -> dict[str, float]:
    """Return the sweep's metrics: the scope metrics over every cell, and the failed items as the sweep's
    closing summary groups them."""
    m = _scope_metrics(s, None)
    m["failed_items"] = int(s.failures["count"].sum()) if not s.failures.is_empty() else 0
    for r in s.failures.iter_rows(named=True):  # the same groups as the sweep's closing summary
        m[f"failed.{r['stage']}.{r['who']}.{r['kind']}"] = r["count"]
    return _clean(m)


def _log_artifacts(client: Any, run_id: str, run_dir: Path, report: Path | None) -> None:
    for path in sorted(run_dir.glob("*.jsonl")):
        client.log_artifact(run_id, str(path), artifact_path="records")
    if (run_dir / "notebooks").is_dir():
        client.log_artifacts(run_id, str(run_dir / "notebooks"), artifact_path="notebooks")
    if report is not None and report.exists():
        client.log_artifact(run_id, str(report), artifact_path="report")


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


def _log_traces(client: Any, exp_id: str, run_dir: Path, rec: _Records, runs: dict[str | None, str],
                progress: _Progress) -> None:
    """Log each answer as a trace (up to MAX_TRACES) with each judge's scores of it as assessments, in batches.

    A new trace is written together with its assessments in one call (``start_trace``), then the
    spans of a whole batch in one ``log_spans``. A trace logged earlier that has new judgments
    gets them in one call as well (``start_trace`` of the same trace id adds them to the stored
    trace). The state file is saved after every batch, so an interrupted track loses at most a batch,
    and redoing one rewrites the same ids.
    """
    from mlflow.tracing.client import TracingClient  # noqa: PLC0415

    state = _state(run_dir)
    assessed = set(state["assessed"])
    pending: dict[str, list[Any]] = {}  # candidate id → its judgments not logged yet
    for j in rec.judgments.values():
        if j.ok and j.id not in assessed and j.candidate_ids:
            pending.setdefault(j.candidate_ids[0], []).append(j)
    room = max(MAX_TRACES - len(state["traces"]), 0)
    new = [c for c in rec.candidates.values() if c.ok and c.id not in state["traces"]][:room]
    known = [rec.candidates[cid] for cid in pending if cid in state["traces"] and cid in rec.candidates]
    if not new and not known:
        return
    tracing, build = TracingClient(tracking_uri(run_dir)), _TraceBuilder(exp_id)
    progress.begin("traces", len(new) + len(known))
    for i in range(0, len(new), TRACE_BATCH):
        batch = new[i:i + TRACE_BATCH]
        written = []
        for c in batch:
            info, span = build.trace(c, rec.cell[c.id], runs.get(rec.cell[c.id]), pending.get(c.id, []))
            written.append((tracing.start_trace(info), span))
            progress.add(1)
        _log_spans(tracing, exp_id, written)
        for c, (info, _) in zip(batch, written):
            state["traces"][c.id] = info.trace_id
            assessed.update(j.id for j in pending.get(c.id, []))
        state["assessed"] = sorted(assessed)
        _save_state(run_dir, state)
    for i in range(0, len(known), TRACE_BATCH):
        batch = known[i:i + TRACE_BATCH]
        for c in batch:
            info, _ = build.trace(c, rec.cell[c.id], runs.get(rec.cell[c.id]), pending[c.id],
                                  trace_id=state["traces"][c.id])
            tracing.start_trace(info)  # the stored trace keeps its spans and assessments; these are added
            assessed.update(j.id for j in pending[c.id])
            progress.add(1)
        state["assessed"] = sorted(assessed)
        _save_state(run_dir, state)


def _log_spans(tracing: Any, exp_id: str, written: list[tuple[Any, Any]]) -> None:
    """Store the spans of a batch of traces in one call (a SQL store), else each trace's as its artifact."""
    from mlflow.exceptions import MlflowException  # noqa: PLC0415

    try:
        tracing.log_spans(exp_id, [span for _, span in written])
    except (NotImplementedError, MlflowException):  # a store without span logging (a file store, an older
        from mlflow.entities import TraceData  # noqa: PLC0415  # server) keeps each trace's spans as its artifact

        for info, span in written:
            tracing._upload_trace_data(info, TraceData(spans=[span]))


class _TraceBuilder:
    """Build an answer's trace in memory: its TraceInfo (tags, its cell's run, the judges' assessments) and its
    one LLM span, from the request to the reply at the recorded time and latency.

    The trace id derives from the experiment and the answer id, the span id from the trace, each
    assessment id from the trace, the judgment and the criterion: writing the same trace again
    (a track interrupted before its state was saved) updates it instead of adding a copy.
    """

    def __init__(self, exp_id: str):
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.id_generator import IdGenerator  # noqa: PLC0415

        class _Ids(IdGenerator):
            trace_id = span_id = 1

            def generate_trace_id(self) -> int:
                return self.trace_id

            def generate_span_id(self) -> int:
                return self.span_id

        self.exp_id, self.ids = exp_id, _Ids()
        # a provider of its own, with no processor: these spans are never exported by mlflow's tracing
        self.tracer = TracerProvider(id_generator=self.ids, resource=Resource.get_empty()).get_tracer("bench.tracking")

    def trace(self, c: Any, cell: str, run_id: str | None, judgments: list[Any],
              trace_id: str | None = None) -> tuple[Any, Any]:
        """Return (TraceInfo with the judgments' assessments, the answer's span) of answer ``c``; with
        ``trace_id`` (a trace logged earlier) no span is built and the info carries only the new assessments."""
        from mlflow.entities import LiveSpan, SpanType, TraceInfo, TraceLocation, TraceState  # noqa: PLC0415
        from mlflow.tracing.constant import (TRACE_SCHEMA_VERSION, TRACE_SCHEMA_VERSION_KEY,  # noqa: PLC0415
                                             TraceMetadataKey, TraceTagKey)
        from mlflow.tracing.utils import generate_mlflow_trace_id_from_otel_trace_id  # noqa: PLC0415

        latency = (c.usage.latency_s or 0.0) if c.usage else 0.0
        end_ns = _ms(c.created_at) * 1_000_000
        start_ns = end_ns - int(latency * 1e9)
        span = None
        if trace_id is None:
            digest = hashlib.sha256(f"{self.exp_id}/{c.id}".encode()).digest()
            self.ids.trace_id = int.from_bytes(digest[:16], "big") or 1
            self.ids.span_id = int.from_bytes(digest[16:24], "big") or 1
            trace_id = generate_mlflow_trace_id_from_otel_trace_id(self.ids.trace_id)
            otel = self.tracer.start_span(cell, start_time=start_ns)
            live = LiveSpan(otel, trace_id, SpanType.LLM)
            live.set_inputs({"messages": c.messages})
            live.set_outputs(c.output)
            live.set_attributes({"model": c.model, "params": c.params, "scenario_id": c.scenario_id,
                                 "candidate_id": c.id})
            live.set_status("OK")
            otel.end(end_time=end_ns)
            span = live.to_immutable_span()
        metadata = {TRACE_SCHEMA_VERSION_KEY: str(TRACE_SCHEMA_VERSION)}
        if run_id:
            metadata[TraceMetadataKey.SOURCE_RUN] = run_id  # the trace shows on its cell's run
        info = TraceInfo(trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(self.exp_id),
                         request_time=start_ns // 1_000_000, state=TraceState.OK,
                         execution_duration=(end_ns - start_ns) // 1_000_000, trace_metadata=metadata,
                         tags={"bench.candidate": c.id, "bench.cell": cell, TraceTagKey.TRACE_NAME: cell},
                         assessments=[a for j in judgments for a in _judge_assessments(trace_id, j)])
        return info, span


def _judge_assessments(trace_id: str, j: Any) -> list[Any]:
    """Return a judgment's scores (each criterion, the composite; a pairwise verdict) as LLM_JUDGE feedback."""
    from mlflow.entities import AssessmentSource, Feedback  # noqa: PLC0415

    source = AssessmentSource(source_type="LLM_JUDGE", source_id=j.judge_model)
    values = dict(j.scores or {}) if j.mode != "pairwise" else {"verdict": j.verdict}
    if j.score is not None:
        values["composite"] = j.score
    out = []
    for name, value in values.items():
        f = Feedback(name=f"{j.judge_id}.{name}", value=value, source=source,
                     rationale=(j.rationale or "")[:4000] or None,
                     metadata={"judgment_id": j.id, "mode": j.mode, "order": j.order or ""})
        f.trace_id = trace_id
        f.assessment_id = "a-" + hashlib.sha256(f"{trace_id}/{j.id}/{name}".encode()).hexdigest()[:32]
        out.append(f)
    return out


def log_reviews(run_dir: str | Path, reviews: list[Any]) -> int:
    """Log human reviews as assessments (source: the reviewer) on their answers' traces; return how many.

    Does nothing when the run was never tracked (no trace to attach to); warns on failure. Idempotent:
    a Review id already logged (remembered in the state file, or found in the trace's assessments'
    ``review_id``) is never logged again.
    """
    run_dir = Path(run_dir)
    state = _state(run_dir)
    done = set(state.setdefault("reviewed", []))
    todo = list({r.id: r for r in reviews if r.id not in done
                 and state["traces"].get(r.candidate_ids[0] if r.candidate_ids else "")}.values())
    if not todo:
        return 0
    logged = 0
    try:
        from mlflow.entities import AssessmentSource  # noqa: PLC0415

        from bench.core.records import Judgment  # noqa: PLC0415
        from bench.core.store import RunStore  # noqa: PLC0415

        judges = {j.id: j.judge_id for j in RunStore(run_dir).iter(Judgment)}
        mlflow = _mlflow(run_dir, run_dir.name)
        for r in todo:
            trace = state["traces"][r.candidate_ids[0]]
            if r.id not in _logged_review_ids(mlflow, trace):  # e.g. logged before a lost state file
                values = dict(r.scores or {}) if r.verdict is None else {"verdict": r.verdict}
                if r.score is not None:
                    values["composite"] = r.score
                for name, value in values.items():
                    mlflow.log_feedback(trace_id=trace, name=f"{judges.get(r.judgment_id, 'judge')}.{name}",
                                        value=value, source=AssessmentSource(source_type="HUMAN", source_id=r.reviewer),
                                        rationale=r.note or None,
                                        metadata={"review_id": r.id, "judgment_id": r.judgment_id})
                logged += 1
            done.add(r.id)
        return logged
    except Exception as err:
        _warn("MLflow logging of reviews", err)
        return logged
    finally:
        state["reviewed"] = sorted(done)
        _save_state(run_dir, state)


def _logged_review_ids(mlflow: Any, trace_id: str) -> set[str]:
    """Return the Review ids of the human assessments already on a trace."""
    trace = mlflow.get_trace(trace_id)
    assessments = (trace.info.assessments or []) if trace is not None else []
    return {str((a.metadata or {}).get("review_id")) for a in assessments if (a.metadata or {}).get("review_id")}
