"""Each answer as an MLflow trace (the model call), each judge's scores of it as assessments on the trace.

Ids derive from the experiment and the records, so a re-track after an interrupted one rewrites rather than
duplicates."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from bench.tracking._console import TrackingProgress
from bench.tracking._run_records import RunRecords, epoch_ms
from bench.tracking.mlflow_store import read_state, save_state, tracking_uri

MAX_TRACES = int(os.environ.get("BENCH_MLFLOW_MAX_TRACES", "2000"))  # answers traced per run (the rest: metrics)
TRACES_PER_WRITE = 250  # traces per log_spans call (the state file is saved after each)


def log_traces(client: Any, exp_id: str, run_dir: Path, rec: RunRecords, runs: dict[str | None, str],
               progress: TrackingProgress) -> None:
    """Log each answer as a trace (up to MAX_TRACES) with each judge's scores as assessments, in chunks.
    The state file is saved after every chunk: an interrupted track loses at most a chunk."""
    from mlflow.tracing.client import TracingClient  # noqa: PLC0415 (mlflow: loaded meanwhile, see _track_run)

    state = read_state(run_dir)
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
    for i in range(0, len(new), TRACES_PER_WRITE):
        chunk = new[i:i + TRACES_PER_WRITE]
        written = []
        for c in chunk:
            info, span = build.trace(c, rec.cell[c.id], runs.get(rec.cell[c.id]), pending.get(c.id, []))
            written.append((tracing.start_trace(info), span))
            progress.add(1)
        _log_spans(tracing, exp_id, written)
        for c, (info, _) in zip(chunk, written):
            state["traces"][c.id] = info.trace_id
            assessed.update(j.id for j in pending.get(c.id, []))
        state["assessed"] = sorted(assessed)
        save_state(run_dir, state)
    for i in range(0, len(known), TRACES_PER_WRITE):
        chunk = known[i:i + TRACES_PER_WRITE]
        for c in chunk:
            info, _ = build.trace(c, rec.cell[c.id], runs.get(rec.cell[c.id]), pending[c.id],
                                  trace_id=state["traces"][c.id])
            tracing.start_trace(info)  # the stored trace keeps its spans and assessments; these are added
            assessed.update(j.id for j in pending[c.id])
            progress.add(1)
        state["assessed"] = sorted(assessed)
        save_state(run_dir, state)


def _log_spans(tracing: Any, exp_id: str, written: list[tuple[Any, Any]]) -> None:
    """Store the spans of a chunk of traces in one call (a SQL store), else each trace's as its artifact."""
    from mlflow.exceptions import MlflowException  # noqa: PLC0415 (mlflow: loaded meanwhile, see _track_run)

    try:
        tracing.log_spans(exp_id, [span for _, span in written])
    except (NotImplementedError, MlflowException):  # a store without span logging (a file store, an older
        from mlflow.entities import TraceData  # noqa: PLC0415  # server) keeps each trace's spans as its artifact

        for info, span in written:
            tracing._upload_trace_data(info, TraceData(spans=[span]))


class _TraceBuilder:
    """Build an answer's trace in memory: its TraceInfo (tags, its cell's run, the judges' assessments) and its one
    LLM span. Its ids derive from the experiment and the records: writing it again updates it."""

    def __init__(self, exp_id: str):
        # opentelemetry's SDK comes with mlflow and is needed only to build spans
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
        # mlflow: loaded meanwhile, see _track_run
        from mlflow.entities import TraceInfo, TraceLocation, TraceState  # noqa: PLC0415
        from mlflow.tracing.constant import (TRACE_SCHEMA_VERSION, TRACE_SCHEMA_VERSION_KEY,  # noqa: PLC0415
                                             TraceMetadataKey, TraceTagKey)

        latency = (c.usage.latency_s or 0.0) if c.usage else 0.0
        end_ns = epoch_ms(c.created_at) * 1_000_000
        start_ns = end_ns - int(latency * 1e9)
        span = None
        if trace_id is None:
            trace_id, span = self._span(c, cell, start_ns, end_ns)
        metadata = {TRACE_SCHEMA_VERSION_KEY: str(TRACE_SCHEMA_VERSION)}
        if run_id:
            metadata[TraceMetadataKey.SOURCE_RUN] = run_id  # the trace shows on its cell's run
        info = TraceInfo(trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(self.exp_id),
                         request_time=start_ns // 1_000_000, state=TraceState.OK,
                         execution_duration=(end_ns - start_ns) // 1_000_000, trace_metadata=metadata,
                         tags={"bench.candidate": c.id, "bench.cell": cell, TraceTagKey.TRACE_NAME: cell},
                         assessments=[a for j in judgments for a in _judge_assessments(trace_id, j)])
        return info, span

    def _span(self, c: Any, cell: str, start_ns: int, end_ns: int) -> tuple[str, Any]:
        """Return (trace id, the answer's LLM span): ids derived from the experiment and the answer id."""
        # mlflow: loaded meanwhile, see _track_run
        from mlflow.entities import LiveSpan, SpanType  # noqa: PLC0415
        from mlflow.tracing.utils import generate_mlflow_trace_id_from_otel_trace_id  # noqa: PLC0415

        digest = hashlib.sha256(f"{self.exp_id}/{c.id}".encode()).digest()
        self.ids.trace_id = int.from_bytes(digest[:16], "big") or 1
        self.ids.span_id = int.from_bytes(digest[16:24], "big") or 1
        trace_id = generate_mlflow_trace_id_from_otel_trace_id(self.ids.trace_id)
        otel = self.tracer.start_span(cell, start_time=start_ns)
        live = LiveSpan(otel, trace_id, SpanType.LLM)
        live.set_inputs({"messages": c.messages})
        live.set_outputs(c.output)
        live.set_attributes({"model": c.model, "params": c.params, "scenario_id": c.scenario_id, "candidate_id": c.id})
        live.set_status("OK")
        otel.end(end_time=end_ns)
        return trace_id, live.to_immutable_span()


def _judge_assessments(trace_id: str, j: Any) -> list[Any]:
    """Return a judgment's scores (each criterion, the composite; a pairwise verdict) as LLM_JUDGE feedback."""
    from mlflow.entities import AssessmentSource, Feedback  # noqa: PLC0415 (mlflow: loaded meanwhile, see _track_run)

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
