"""MLflow tracking speed: `bench track` of a fresh run, against the way bench wrote traces before issue 13,
side by side in one run.

The run: a fake-provider sweep of N answers (2 models × 2 prompts × N/4 scenarios; default N = 500), each
graded by a rubric judge (tip-v1: 3 criteria and the composite, so 4 assessments per answer): 2N records,
and the same with 2N answers. Each run is collected once (``--no-track``), then copied for every
measurement; each measurement is one fresh ``bench track`` process on its own copy (a new MLflow store),
timed from start to exit, Python's start-up, imports and the new store's tables included:

  new   bench track as it is: one log_batch per MLflow run; each trace written together with its
        assessments in one call and the spans of 250 traces in one log_spans
  old   the same command with the traces written as before issue 13 (the rest is the same): one
        exported span per answer (mlflow.start_span_no_context) and one mlflow.log_feedback per score

  new x2  the new way on the run of 2N answers: the difference to "new" is what each further 1,000
        records cost, without the fixed start-up

Every store must end with one trace per answer and 4 assessments per trace (checked). Target: ≤ 10 s per
1,000 records. The last line is one JSON object.

    python benchmarks/tracking.py [--answers 500] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_MAX_TRACES = int(os.environ.get("BENCH_MLFLOW_MAX_TRACES", "2000"))  # the old way's cap: the same as the new's


def old_log_traces(client, exp_id, run_dir, rec, runs, progress) -> None:
    """The trace writing of bench before issue 13 (same signature as bench.tracking._traces.log_traces)."""
    import mlflow  # noqa: PLC0415
    from mlflow.entities import AssessmentSource  # noqa: PLC0415

    from bench.core.records import canonical_json  # noqa: PLC0415
    from bench.tracking import tracking_uri  # noqa: PLC0415

    mlflow.set_tracking_uri(tracking_uri(run_dir))
    mlflow.set_experiment(experiment_id=exp_id)
    traces: dict[str, str] = {}
    for c in rec.candidates.values():
        if c.ok and len(traces) < OLD_MAX_TRACES:
            cell = f"{c.model_id}/{c.prompt_id}@{c.prompt_version}"
            latency = (c.usage.latency_s or 0.0) if c.usage else 0.0
            end_ns = int(datetime.fromisoformat(c.created_at).timestamp() * 1000) * 1_000_000
            span = mlflow.start_span_no_context(
                name=cell, span_type="LLM", inputs={"messages": c.messages}, start_time_ns=end_ns - int(latency * 1e9),
                attributes={"model": c.model, "params": canonical_json(c.params), "scenario_id": c.scenario_id,
                            "candidate_id": c.id},
                tags={"bench.candidate": c.id, "bench.cell": cell})
            span.set_outputs(c.output)
            span.end(end_time_ns=end_ns)
            traces[c.id] = span.trace_id
    mlflow.flush_trace_async_logging()
    for j in rec.judgments.values():
        trace = traces.get(j.candidate_ids[0])
        if not j.ok or trace is None:
            continue
        source = AssessmentSource(source_type="LLM_JUDGE", source_id=j.judge_model)
        values = dict(j.scores or {}) if j.mode != "pairwise" else {"verdict": j.verdict}
        if j.score is not None:
            values["composite"] = j.score
        for name, value in values.items():
            mlflow.log_feedback(trace_id=trace, name=f"{j.judge_id}.{name}", value=value, source=source,
                                rationale=(j.rationale or "")[:4000] or None,
                                metadata={"judgment_id": j.id, "mode": j.mode, "order": j.order or ""})


def _old_child(run_dir: str) -> int:
    """``--old-track RUN``: `bench track RUN` with the traces written the old way."""
    import bench.tracking.runs  # noqa: PLC0415
    from bench.cli import main  # noqa: PLC0415

    bench.tracking.runs.log_traces = old_log_traces
    return main(["track", run_dir])


def collect(tmp: Path, answers: int) -> Path:
    """Run the sweep of ``answers`` answers once, untracked; return its run folder."""
    from bench.testing.fake_provider import FakeProvider  # noqa: PLC0415
    from bench.testing.grids import env, generate, grid, judge, model, prompt  # noqa: PLC0415

    with FakeProvider() as fake:
        url = fake.url  # two models × two prompts × answers/4 scenarios, one judge
        params = grid(tmp / f"trackbench{answers}.yaml", url, name=f"trackbench{answers}",
                      models=[model("m1", url, name="fake-a", params={"max_tokens": 32}),
                              model("m2", url, name="fake-b", params={"max_tokens": 32})],
                      prompts=[prompt("tip", "Persona {i}: one practical tip."),
                               prompt("tip", "As persona {i}, what is one practical tip?", version="v2")],
                      scenarios=generate(i=list(range(answers // 4))), judges=[judge("grader", url, name="judge")],
                      limits={"max_concurrency": 64, "timeout_s": 30, "retries": 2})
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "bench", "sweep", str(params), "--no-track", "--no-report"],
                             cwd=ROOT, env=env(tmp), capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"sweep failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
        print(f"collected {answers} answers and their judgments in {time.monotonic() - t0:.1f} s", flush=True)
    return tmp / "runs" / f"trackbench{answers}"


def measure(kind: str, run: Path, tmp: Path, label: str) -> dict:
    """Track a fresh copy of ``run`` the ``kind`` way in a new process; return its times and what it logged."""
    from bench.testing.grids import env  # noqa: PLC0415 (here, not in the timed child of --old-track)

    copy = tmp / "copies" / label / run.name
    shutil.copytree(run, copy)
    cmd = ([sys.executable, "-m", "bench", "track", str(copy)] if kind == "new"
           else [sys.executable, str(Path(__file__).resolve()), "--old-track", str(copy)])
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=ROOT, env=env(tmp), capture_output=True, text=True)
    wall = time.monotonic() - t0
    said = re.search(r"tracking: logged to MLflow .* in ([0-9.]+)s", out.stdout)
    if out.returncode != 0 or not said:
        raise SystemExit(f"{kind}: tracking failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    progress = [ln for ln in out.stdout.splitlines() if ln.startswith("tracking: ") and "logged to" not in ln]
    traces, assessments = _logged(copy)
    return {"wall_s": wall, "track_s": float(said.group(1)), "traces": traces, "assessments": assessments,
            "progress_lines": len(progress), "longest_silence_s": _silence(progress, float(said.group(1)))}


def _silence(progress: list[str], total: float) -> float:
    """Return the longest stretch without a tracking line, from the progress lines' elapsed seconds."""
    marks = [0.0, *(float(m.group(1)) for ln in progress if (m := re.search(r"\((\d+)s\)$", ln))), total]
    return max(b - a for a, b in zip(marks, marks[1:]))


def _logged(run_dir: Path) -> tuple[int, int]:
    from mlflow import MlflowClient  # noqa: PLC0415

    client = MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"bench/{run_dir.name}")
    traces = client.search_traces(locations=[exp.experiment_id], max_results=50_000)
    return len(traces), sum(len(t.info.assessments) for t in traces)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--answers", type=int, default=500, help="answers in the run (a multiple of 4)")
    ap.add_argument("--rounds", type=int, default=1, help="this many rounds (orders alternate); medians")
    ap.add_argument("--old-track", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.old_track:
        raise SystemExit(_old_child(a.old_track))
    n = a.answers
    with tempfile.TemporaryDirectory(prefix="trackbench-") as tmp_name:
        tmp = Path(tmp_name)
        runs = {"new": collect(tmp, n), "old": None, "new x2": collect(tmp, 2 * n)}
        runs["old"] = runs["new"]
        records = {k: sum(1 for f in ("candidates.jsonl", "judgments.jsonl") for line in (run / f).open()
                          if line.strip()) for k, run in runs.items()}
        results: dict[str, list[dict]] = {k: [] for k in runs}
        for r in range(a.rounds):
            for kind in ("new", "old", "new x2") if r % 2 == 0 else ("new x2", "old", "new"):
                m = measure(kind.split()[0], runs[kind], tmp, f"{kind.replace(' ', '')}-{r}")
                results[kind].append(m)
                print(f"round {r + 1} {kind:>6}: {records[kind]} records, bench track {m['wall_s']:5.1f} s wall "
                      f"({m['track_s']:.1f} s said), {m['traces']} traces, {m['assessments']} assessments, "
                      f"{m['progress_lines']} progress line(s), longest silence {m['longest_silence_s']:.0f} s",
                      flush=True)
    med = {k: sorted(x["wall_s"] for x in v)[len(v) // 2] for k, v in results.items()}
    same = all((m["traces"], m["assessments"]) == (records[k] // 2, 2 * records[k])
               for k, v in results.items() for m in v)
    whole = {k: med[k] / records[k] * 1000 for k in ("new", "old")}
    marginal = (med["new x2"] - med["new"]) / (records["new x2"] - records["new"]) * 1000
    print(f"{records['new']} records ({n} answers, {n} judgments): new {med['new']:.1f} s vs old {med['old']:.1f} s "
          f"({med['old'] / med['new']:.1f}x faster), whole command (start-up, imports, a new store's tables "
          f"included); {records['new x2']} records: new {med['new x2']:.1f} s, so each further 1,000 records cost "
          f"{marginal:.1f} s (target <= 10 s per 1,000 records); traces and assessments as expected in every store: "
          f"{'yes' if same else 'NO'}. (The old way here already has the new progress lines; before issue 13 "
          f"tracking printed nothing until it ended.)")
    print(json.dumps({"answers": n, "records": records["new"], "rounds": a.rounds,
                      "new_s": round(med["new"], 2), "old_s": round(med["old"], 2),
                      "speedup": round(med["old"] / med["new"], 2), "new_s_per_1000_records": round(whole["new"], 2),
                      "old_s_per_1000_records": round(whole["old"], 2), "records_x2": records["new x2"],
                      "new_x2_s": round(med["new x2"], 2), "new_marginal_s_per_1000_records": round(marginal, 2),
                      "same_traces_and_assessments": same,
                      "new_longest_silence_s": round(max(m["longest_silence_s"] for m in results["new x2"]), 1)}))


if __name__ == "__main__":
    main()
