"""The `bench` command. Each subcommand is a thin call into the package."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError

SMOKE_SCHEMA = {
    "type": "object",
    "properties": {"tip": {"type": "string", "minLength": 1, "maxLength": 200},
                   "minutes": {"type": "integer", "enum": [5, 10, 15, 20, 25, 30]}},  # llama.cpp grammars enforce enum
    "required": ["tip", "minutes"],
    "additionalProperties": False,
}


def _smoke(args: argparse.Namespace) -> int:
    """Answer one plain and one schema-constrained request through bench.models.client, then once more from cache."""
    from bench.models.client import LLM, Limits  # noqa: PLC0415
    from bench.models.preflight import preflight  # noqa: PLC0415
    from bench.models.routing import ModelSpec  # noqa: PLC0415

    spec = ModelSpec(args.model, api_base=args.api_base, params={"temperature": 0.2, "max_tokens": 64, "seed": 7})
    preflight([spec])
    llm = LLM(Limits(max_concurrency=2, timeout_s=120), cache=str(Path(args.runs) / "smoke" / "responses.sqlite"))
    plain = [{"role": "user", "content": "Give one short tip for staying focused while studying."}]
    structured = [{"role": "user", "content": "Give one study tip as JSON with keys tip and minutes."}]
    rf = {"type": "json_schema", "json_schema": {"name": "tip", "schema": SMOKE_SCHEMA, "strict": True}}

    async def run() -> None:
        for label, msgs, fmt, extra in (("plain", plain, None, None), ("json", structured, rf, {"max_tokens": 160})):
            t0 = time.perf_counter()
            comp = await llm.complete(spec, msgs, response_format=fmt, params=extra)
            if fmt is not None:
                json.loads(comp.text, strict=False)  # a constrained reply must parse; raises otherwise
            u = comp.usage
            print(f"[{label}] {comp.text.strip()!r}")
            print(f"    tokens {u.prompt_tokens}+{u.completion_tokens}, latency {u.latency_s}s, "
                  f"cost {'unknown' if u.cost_usd is None else f'${u.cost_usd:.6f}'}, cached {u.cached}, "
                  f"wall {time.perf_counter() - t0:.2f}s")
        await llm.aclose()

    asyncio.run(run())
    print(f"model calls made: {llm.calls} (a second run is answered from {llm.cache.path})")
    return 0


def _validate(args: argparse.Namespace) -> int:
    """Print the grid and, per stage, the requests a sweep would send now; then run the preflight."""
    from bench.estimate import plan_requests, plan_table  # noqa: PLC0415
    from bench.models.preflight import preflight  # noqa: PLC0415
    from bench.pipeline import make_llm, open_run  # noqa: PLC0415

    run = open_run(args.params, cells=args.cells)
    print(run.describe())
    for cell in run.cells:
        print(f"  cell {cell.key}: {cell.model.model} {cell.model.params or ''}")
    for j in run.sweep.judges:
        print(f"  judge {j.id}: {j.model}, rubric {j.rubric}")
    plans = plan_requests(run, make_llm(run))
    print("requests a sweep would send now (first turns; retries and repair turns come on top; "
          "'+?': answers not collected yet, so their judge requests cannot be looked up in the cache):")
    print(plan_table(plans))
    preflight([c.model.spec() for c in run.cells] + [j.spec() for j in run.sweep.judges])
    print("preflight: ok (every model string known, every key set, every api_base answering); nothing was called")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from bench.pipeline import open_run  # noqa: PLC0415

    run = open_run(args.params, cells=args.cells, run_dir=args.run_dir)
    try:
        return _sweep_run(run, args)
    except KeyboardInterrupt:  # Ctrl-C: one line, no report, no MLflow run
        return _sweep_interrupted(run, args)


def _sweep_interrupted(run: Any, args: argparse.Namespace) -> int:
    """Print the one line of an interrupted sweep (what was saved, what is left, how to resume); return 130."""
    from bench.core.outcome import EXIT_INTERRUPTED, retry_command  # noqa: PLC0415
    from bench.pipeline import interrupted_line, shown_path  # noqa: PLC0415

    resume = "resume with: " + retry_command(args.params, cells=args.cells, run_dir=args.run_dir, jobs=args.jobs,
                                             only_stage=args.only_stage)
    try:
        line = interrupted_line(run, resume)
    except (Exception, KeyboardInterrupt):  # a second Ctrl-C, or a store that cannot be read: still one line
        line = f"interrupted: what was answered is saved in {shown_path(run.dir)}; {resume}"
    print(line, file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def _sweep_run(run: Any, args: argparse.Namespace) -> int:
    from bench.core.outcome import (EXIT_CRASHED, EXIT_FAILED_ITEMS, failures, repeats_since, retry_command,  # noqa: PLC0415
                          summary)
    from bench.core.runlock import run_lock  # noqa: PLC0415
    from bench.sweep import print_executions, run_sweep  # noqa: PLC0415

    with run_lock(run.dir, wait=args.wait):  # one sweep per run folder: a second one refuses (or waits)
        result = run_sweep(run, jobs=args.jobs, per_cell=args.per_cell, only_stage=args.only_stage)
        code = print_executions(result.executions)
        report = None
        if code:  # an execution crashed: the run is incomplete, and a report or an MLflow run would hide it
            print("report and tracking: skipped, the run is incomplete (an execution failed); "
                  "they follow when a sweep ends without a crash", flush=True)
        if not args.no_report and not code:
            try:
                report = _render(result.run_dir, None)
            except BenchError as err:
                print(f"report: FAILED ({err})", file=sys.stderr)
                code = EXIT_CRASHED
        if not args.no_track and not code:
            _track(result.run_dir, report, {e.name: "ok" for e in result.executions})
    repeats = repeats_since(result.run_dir, result.started)
    if repeats:
        print(f"up to {repeats} request(s) were on the wire when an earlier run of this folder stopped and may "
              f"have been asked again (paid twice)", flush=True)
    groups = failures(result.run_dir, run.sweep.limits.max_attempts)
    if groups:
        retry = retry_command(args.params, cells=args.cells, run_dir=args.run_dir, jobs=args.jobs)
        print(summary(groups, retry, run.sweep.limits.max_attempts), flush=True)
        code = code or EXIT_FAILED_ITEMS
    if report is not None:
        print(f"report: {report}")  # the last line: where to look
    return code


def _track(run_dir: Path, report: Path | None, status: dict[str, str]) -> None:
    from bench.tracking.runs import track_run, tracking_uri  # noqa: PLC0415

    t0 = time.monotonic()
    if track_run(run_dir, status=status, report=report):
        print(f"tracking: logged to MLflow at {_display_uri(tracking_uri(run_dir))} in {time.monotonic() - t0:.1f}s "
              f"(see it with: bench ui {run_dir})", flush=True)


def _display_uri(uri: str) -> str:
    """Return a tracking URI without any credentials it may carry (user:password@host, a token)."""
    from bench.core.secrets import redact  # noqa: PLC0415

    return redact(uri)


def _track_cmd(args: argparse.Namespace) -> int:
    from bench.core.runlock import run_lock  # noqa: PLC0415

    with run_lock(Path(args.run_dir), wait=True):  # never beside a sweep logging the same run
        _track(Path(args.run_dir), Path(args.report) if args.report else None, {})
    return 0


def _review(args: argparse.Namespace) -> int:
    from bench.review.session import ReviewSession  # noqa: PLC0415

    session = ReviewSession(args.run_dir, reviewer=getattr(args, "reviewer", None))
    if args.action == "export":
        n = session.export(args.file, filter=args.filter)
        print(f"wrote {n} entries to {args.file}; fill in each entry's review, then: "
              f"bench review apply {args.run_dir} {args.file}")
    else:
        applied = session.apply_file(args.file)  # idempotent: entries already applied are skipped
        done, total = session.progress()
        print(f"{applied.message}; {done} of {total} items reviewed")
    return 0


def _render(run_dir: Path, out: str | None, **options) -> Path:
    from bench.report.render import render_report  # noqa: PLC0415

    t0 = time.monotonic()
    print("report: rendering notebooks/03_analyze.ipynb (no model is called) …", flush=True)
    path = render_report(run_dir, out, **options)
    print(f"report: rendered in {time.monotonic() - t0:.1f}s", flush=True)
    return path


def _report(args: argparse.Namespace) -> int:
    baseline = None if args.baseline == "none" else args.baseline
    path = _render(Path(args.run_dir), args.out, resamples=args.resamples, seed=args.seed, compare=args.compare,
                   baseline=baseline, strong_weight=args.strong_weight, human_overrides=args.human_overrides)
    print(f"report: {path}")
    if args.screenshot:
        from bench.report.render import screenshot  # noqa: PLC0415

        print(f"screenshot: {screenshot(path, args.screenshot)}")
    return 0


def _judgebench_score(args: argparse.Namespace) -> int:
    from bench.judgebench import main_score  # noqa: PLC0415

    return main_score([args.file, *(["--json"] if args.json else [])])


def _judgebench_export(args: argparse.Namespace) -> int:
    """Write a run's pairwise judgments of one judge in JudgeBench's format (then score it like theirs)."""
    from bench.judgebench import export_judgebench, write_jsonl  # noqa: PLC0415
    from bench.core.records import Judgment, Scenario  # noqa: PLC0415
    from bench.core.store import RunStore  # noqa: PLC0415

    store = RunStore(args.run_dir)
    judgments = [j for j in store.latest(Judgment).values() if j.mode == "pairwise"]
    judges = sorted({j.judge_id for j in judgments})
    judge = args.judge or (judges[0] if len(judges) == 1 else None)
    if judge not in judges:
        raise BenchError(f"{args.run_dir}: choose a pairwise judge with --judge; the run has {judges or 'none'}")
    scenarios = {s.id: s for s in store.read(Scenario)}
    records = export_judgebench([j for j in judgments if j.judge_id == judge], scenarios, judge)
    print(f"wrote {len(records)} pairs judged by {judge} to {write_jsonl(records, args.file)}")
    return 0


def _serve_local(args: argparse.Namespace) -> int:
    from bench.models.local import manager as local  # noqa: PLC0415

    local.serve_foreground(args.model, port=args.port)
    return 0


def _ui(args: argparse.Namespace) -> int:
    from bench.tracking.ui import serve  # noqa: PLC0415

    return serve(args.run, port=args.port)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the `bench` command."""
    p = argparse.ArgumentParser(prog="bench", description="Evaluate LLMs and prompts with LLM judges.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("smoke", help="answer a smoke request through bench.models.client (default: the embedded model)")
    s.add_argument("--model", default="local/gemma-3-270m", help="LiteLLM model string or local/<name>")
    s.add_argument("--api-base", default=None, help="OpenAI-compatible base URL (vLLM, Ollama, …)")
    s.add_argument("--runs", default="runs", help="run folder root (the cache lives under it)")
    s.set_defaults(func=_smoke)

    s = sub.add_parser("validate", help="check a params file and print the grid; runs the preflight, calls nothing")
    s.add_argument("params", help="params/<grid>.yaml")
    s.add_argument("--cells", default=None, help="comma-separated cells (model_id/prompt_id@version)")
    s.set_defaults(func=_validate)

    s = sub.add_parser("sweep", help="run the stage notebooks with papermill over a params grid (resumable)")
    s.add_argument("params", help="params/<grid>.yaml")
    s.add_argument("--jobs", type=int, default=1, help="papermill executions side by side (cap is divided)")
    s.add_argument("--per-cell", action="store_true", help="one executed notebook per (model, prompt) cell")
    s.add_argument("--cells", default=None, help="only these cells (comma-separated model_id/prompt_id@version)")
    s.add_argument("--only-stage", default=None, choices=["collect", "judge"],
                   help="run one stage only: collect (answers; judges grade them as they arrive) or judge "
                        "(grade the answers already collected)")
    s.add_argument("--wait", action="store_true",
                   help="if another sweep is writing the same run folder, wait for it instead of refusing")
    s.add_argument("--run-dir", default=None, help="run folder (default runs/<sweep name>)")
    s.add_argument("--no-report", action="store_true", help="do not render reports/<sweep>/index.html at the end")
    s.add_argument("--no-track", action="store_true", help="do not log the run to MLflow at the end")
    s.set_defaults(func=_sweep)

    _add_run_commands(sub)
    s = sub.add_parser("judgebench-score", help="score a judge output file in JudgeBench's format (JudgeBench's rule)")
    s.add_argument("file", help="FILE.jsonl: pair records with judge_name and judgments")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_judgebench_score)

    s = sub.add_parser("judgebench-export", help="write a run's pairwise judgments in JudgeBench's file format")
    s.add_argument("run_dir", help="runs/<sweep>")
    s.add_argument("file", help="FILE.jsonl to write")
    s.add_argument("--judge", default=None, help="the pairwise judge's id (needed when the run has several)")
    s.set_defaults(func=_judgebench_export)

    s = sub.add_parser("serve-local", help="serve the embedded model on loopback in the foreground")
    s.add_argument("--model", default="local/gemma-3-270m")
    s.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    s.set_defaults(func=_serve_local)

    s = sub.add_parser("ui", help="MLflow's UI on a run's store, offline, on loopback, until Ctrl-C")
    s.add_argument("run", nargs="?", default=None,
                   help="runs/<sweep> or a sweep name (default: MLFLOW_TRACKING_URI if set, else the run under "
                        "runs/ tracked last)")
    s.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    s.set_defaults(func=_ui)
    return p


def _add_run_commands(sub: Any) -> None:
    """Add the commands that work on a finished run folder: report, track, review."""
    s = sub.add_parser("report", help="render a run's analysis as reports/<sweep>/index.html (calls no model)")
    s.add_argument("run_dir", help="runs/<sweep>")
    s.add_argument("--out", default=None, help="HTML file or folder to write (default reports/<sweep>/index.html)")
    s.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    s.add_argument("--seed", type=int, default=0, help="seed of every resample and permutation")
    s.add_argument("--compare", default="all", choices=["all", "prompts", "models"],
                   help="paired differences between all cells, prompts within a model, or models within a prompt")
    s.add_argument("--baseline", default="auto",
                   help="pairwise win rates against this cell (model_id/prompt_id@version), auto or none")
    s.add_argument("--strong-weight", type=float, default=1.0,
                   help="battles a strong pairwise verdict counts for (3 as in arena-hard)")
    s.add_argument("--human-overrides", action="store_true",
                   help="count each reviewed judgment with its latest human review instead of the judge's grade")
    s.add_argument("--screenshot", default=None, metavar="PNG",
                   help="also save a PNG of the report's first screen (headless Chromium)")
    s.set_defaults(func=_report)

    s = sub.add_parser("track", help="log a run to MLflow (runs/<sweep>/mlflow.db unless MLFLOW_TRACKING_URI)")
    s.add_argument("run_dir", help="runs/<sweep>")
    s.add_argument("--report", default=None, help="the report to attach (default: none)")
    s.set_defaults(func=_track_cmd)

    s = sub.add_parser("review", help="offline review: export items to a JSON file, apply the filled-in file")
    rs = s.add_subparsers(dest="action", required=True)
    e = rs.add_parser("export", help="write the run's judgments to review as FILE.json")
    e.add_argument("run_dir", help="runs/<sweep>")
    e.add_argument("file", help="FILE.json to write")
    e.add_argument("--filter", default="all", help="all, disagreement, unreviewed, failures or extreme")
    e.set_defaults(func=_review)
    a = rs.add_parser("apply", help="validate a filled-in FILE.json and append its reviews (all or nothing)")
    a.add_argument("run_dir", help="runs/<sweep>")
    a.add_argument("file", help="FILE.json filled in by a reviewer")
    a.set_defaults(func=_review)


def main(argv: list[str] | None = None) -> int:
    """Run the `bench` command; return its exit status (2 for a bench error, with one clear message)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BenchError as err:
        from bench.core.secrets import redact  # noqa: PLC0415

        print(f"bench {args.command}: error: {redact(str(err))}", file=sys.stderr)  # e.g. an api_base's password
        return 2
    except KeyboardInterrupt:
        print(f"bench {args.command}: interrupted", file=sys.stderr)
        return 130
