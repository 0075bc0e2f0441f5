"""The `bench` command: each subcommand a thin call into the package, its module imported when it runs
(:func:`_lazy`), so `bench sweep` does not load the comparison, tracking and report code."""

from __future__ import annotations

import argparse
import os
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError, Halted
from bench.core.paths import BACKEND_ENV
from bench.core.secrets import redact
from bench.cli_review import add_review_command
from bench.cli_status import add_status_command
from bench.imports.command import add_import_command


def _lazy(module: str, name: str) -> Any:
    """Return ``name`` of ``module``, imported now: only the command that runs loads its modules."""
    return getattr(import_module(module), name)


def _smoke(args: argparse.Namespace) -> int:
    return _lazy("bench.models.smoke", "smoke")(args.model, args.api_base, args.runs)


def _validate(args: argparse.Namespace) -> int:
    return _lazy("bench.estimate", "validate")(args.params, args.cells)


def _estimate(args: argparse.Namespace) -> int:
    return _lazy("bench.estimate", "estimate_command")(args.params, args.cells, args.run_dir, as_json=args.json)


def _sweep(args: argparse.Namespace) -> int:
    request = _lazy("bench.sweep", "SweepRequest")(
        args.params, cells=args.cells, run_dir=args.run_dir, jobs=args.jobs, per_cell=args.per_cell,
        only_stage=args.only_stage, wait=args.wait, report=not args.no_report, track=not args.no_track,
        dry_run=args.dry_run, cluster=args.cluster, batch=args.batch, supersede=args.supersede, junit=args.junit,
        progress_every_s=args.progress_every, cluster_wait_s=args.cluster_wait)
    return _lazy("bench.sweep", "sweep_command")(request)


def _track(args: argparse.Namespace) -> int:
    with _lazy("bench.core.runlock", "run_lock")(Path(args.run_dir), wait=True):  # never beside a sweep logging it
        _lazy("bench.sweep", "track")(Path(args.run_dir), Path(args.report) if args.report else None, {})
    return 0


def _report(args: argparse.Namespace) -> int:
    baseline = None if args.baseline == "none" else args.baseline
    path = _lazy("bench.sweep", "report_command")(
        Path(args.run_dir), args.out, resamples=args.resamples, seed=args.seed, compare=args.compare,
        baseline=baseline, strong_weight=args.strong_weight, human_overrides=args.human_overrides)
    print(f"report: {path}")
    if args.screenshot:
        print(f"screenshot: {_lazy('bench.report.render', 'screenshot')(path, args.screenshot)}")
    return 0


def _judgebench_score(args: argparse.Namespace) -> int:
    return _lazy("bench.judgebench", "print_score")(args.file, as_json=args.json)


def _judgebench_export(args: argparse.Namespace) -> int:
    n, judge, path = _lazy("bench.judgebench", "export_run")(args.run_dir, args.file, args.judge)
    print(f"wrote {n} pairs judged by {judge} to {path}")
    return 0


def _serve_local(args: argparse.Namespace) -> int:
    _lazy("bench.models.local", "serve_foreground")(args.model, port=args.port)
    return 0


def _ui(args: argparse.Namespace) -> int:
    return _lazy("bench.tracking.ui", "serve")(args.run, port=args.port)


def _tracking_server(args: argparse.Namespace) -> int:
    uri = args.backend_store_uri or os.environ.get(BACKEND_ENV)
    if not uri:
        raise BenchError(f"bench tracking-server: give the backend store as --backend-store-uri URI or in "
                         f"{BACKEND_ENV} (the variable keeps a password off every command line)")
    return _lazy("bench.tracking.server", "tracking_server")(uri, args.artifacts_destination, host=args.host,
                                                             port=args.port)


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

    _add_estimate_command(sub)
    _add_sweep_command(sub)
    add_status_command(sub)
    add_import_command(sub)
    _add_run_commands(sub)
    _add_compare_command(sub)
    _add_gate_command(sub)
    _add_judges_command(sub)
    _add_align_command(sub)
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

    s = sub.add_parser("tracking-server", help="a team's MLflow tracking server on PostgreSQL, until Ctrl-C; "
                                               "workers log to it through MLFLOW_TRACKING_URI")
    s.add_argument("--backend-store-uri", metavar="URI",
                   help="postgresql://USER[:PASSWORD]@HOST:PORT/DATABASE (checked before starting; never printed "
                        f"with its password); default ${BACKEND_ENV}, which keeps a password off the command line")
    s.add_argument("--artifacts-destination", required=True, metavar="DIR",
                   help="where artifacts go (a folder on a shared filesystem, or s3://…), served through the server")
    s.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1; 0.0.0.0 "
                                                       "makes it reachable from the network)")
    s.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    s.set_defaults(func=_tracking_server)
    return p


def _add_estimate_command(sub: Any) -> None:
    """Add `bench estimate`."""
    s = sub.add_parser("estimate", help="print, per stage, the requests, tokens and cost the next sweep will spend "
                                        "(with and without the Batch API); calls nothing, starts nothing")
    s.add_argument("params", help="params/<grid>.yaml")
    s.add_argument("--cells", default=None, help="comma-separated cells (model_id/prompt_id@version)")
    s.add_argument("--run-dir", default=None, help="run folder (default runs/<sweep name>): what it holds is not "
                                                   "asked again")
    s.add_argument("--json", action="store_true", help='print one JSON object: {"stages": [...], "total": {...}}')
    s.set_defaults(func=_estimate)


def _add_sweep_command(sub: Any) -> None:
    """Add `bench sweep`."""
    s = sub.add_parser("sweep", help="run the stage notebooks with papermill over a params grid (resumable)")
    s.add_argument("params", help="params/<grid>.yaml")
    s.add_argument("--jobs", type=int, default=1, help="papermill executions side by side (cap is divided)")
    s.add_argument("--per-cell", action="store_true", help="one executed notebook per (model, prompt) cell")
    s.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="run each cell's executions as Dask tasks on the scheduler at ADDRESS (default: "
                        "$DASK_SCHEDULER_ADDRESS), or on local:N, N worker processes on this machine; caps hold "
                        "across all workers (docs/cluster.md)")
    s.add_argument("--cluster-wait", type=float, default=None, metavar="S",
                   help="how long to try reaching the --cluster scheduler and its first worker (default 20)")
    s.add_argument("--cells", default=None, help="only these cells (comma-separated model_id/prompt_id@version)")
    s.add_argument("--only-stage", default=None, choices=["collect", "judge"],
                   help="run one stage only: collect (answers; judges grade them as they arrive) or judge "
                        "(grade the answers already collected)")
    s.add_argument("--wait", action="store_true",
                   help="if another sweep is writing the same run folder, wait for it instead of refusing")
    s.add_argument("--run-dir", default=None, help="run folder (default runs/<sweep name>)")
    s.add_argument("--no-report", action="store_true", help="do not render reports/<sweep>/index.html at the end")
    s.add_argument("--no-track", action="store_true", help="do not log the run to MLflow at the end")
    s.add_argument("--dry-run", action="store_true",
                   help="answer every model and judge in-process with dry/<name> (schema-valid replies, no server, "
                        "no cost) into runs/<name>-dry: the whole pipeline end to end before spending")
    s.add_argument("--batch", action="store_true",
                   help="send every model's and judge's requests through its provider's Batch API (about half the "
                        "price; results within the provider's window, usually hours): docs/batch-apis.md")
    s.add_argument("--supersede", action="store_true",
                   help="a cell, judge or rubric version whose content changed under the same name (a template edited "
                        "without a version bump) gets the new content; its earlier records are set aside from every "
                        "analysis and kept in the run folder (docs/records.md, One content per name)")
    s.add_argument("--junit", default=None, metavar="FILE",
                   help="write the params file's gates as JUnit XML to FILE (one test case per check; docs/gates.md)")
    s.add_argument("--progress-every", type=float, default=None, metavar="S",
                   help="seconds between two progress lines (default: 2 on a terminal, 5 into a pipe or a file)")
    s.set_defaults(func=_sweep)


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
    s.set_defaults(func=_track)

    add_review_command(sub)


def _add_compare_command(sub: Any) -> None:
    """Add `bench compare`: run B against run A on the items they share (docs/compare.md)."""
    s = sub.add_parser("compare", help="compare run B with run A on the items they share: paired differences with "
                                       "CIs and Holm-corrected tests, a diff report, an MLflow run (docs/compare.md)")
    s.add_argument("run_a", help="runs/<sweep> (or a sweep name): the run compared with, e.g. main's")
    s.add_argument("run_b", help="runs/<sweep> (or a sweep name): the new run")
    s.add_argument("--map", action="append", default=[], metavar="A_CELL=B_CELL", type=_cell_pair,
                   help="pair a cell of run A with a differently named cell of run B (repeatable); cells of the "
                        "same name pair by themselves")
    s.add_argument("--json", action="store_true", help="print the comparison as one JSON document (only that on "
                                                       "stdout)")
    s.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of the scenarios (default 2000)")
    s.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    s.add_argument("--alpha", type=float, default=0.05, help="significance level; intervals are 1 - alpha")
    s.add_argument("--human-overrides", action="store_true",
                   help="count each reviewed judgment with its latest human review instead of the judge's grade")
    s.add_argument("--allow-rubric-change", action="store_true", help="compare though a rubric's content differs")
    s.add_argument("--out", default=None, help="HTML file or folder to write (default reports/<a>-vs-<b>/index.html)")
    s.add_argument("--no-report", action="store_true", help="do not write the diff report")
    s.add_argument("--no-track", action="store_true", help="do not log the comparison to MLflow")
    s.set_defaults(func=_compare)


def _compare(args: argparse.Namespace) -> int:
    return _lazy("bench.compare.command", "compare_command")(
        args.run_a, args.run_b, mapping=dict(args.map), seed=args.seed, n_boot=args.resamples, alpha=args.alpha,
        human_overrides=args.human_overrides, as_json=args.json, out=args.out, report=not args.no_report,
        track=not args.no_track, allow_rubric_change=args.allow_rubric_change)


def _add_gate_command(sub: Any) -> None:
    """Add `bench gate`: a run checked against floors and a baseline run; exit 5 when a gate fails."""
    s = sub.add_parser("gate", help="check a run against floors and a baseline run (exit 5 when a gate fails, 6 when it "
                                    "cannot decide; "
                                    "docs/gates.md); prints every check, writes JUnit XML with --junit")
    s.add_argument("run_dir", help="runs/<sweep> (or a sweep name): the run to check")
    s.add_argument("--baseline", default=None, metavar="RUN", help="the run folder (or sweep name) to compare with, "
                                                                     "e.g. main's")
    s.add_argument("--min", action="append", default=None, metavar="[JUDGE[.CRITERION]=]VALUE", help="floor on "
                   "every cell's composite mean per judge; JUDGE=V, JUDGE.CRITERION=V: one judge's (repeatable)")
    s.add_argument("--max-drop", type=float, default=None, metavar="VALUE",
                   help="largest allowed drop of a matched cell's composite against --baseline")
    s.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                   help="pass only a bound shown kept (default: fail only one shown broken); --no-strict undoes it")
    s.add_argument("--alpha", type=float, default=None, metavar="A", help="family-wise error rate (default 0.05)")
    s.add_argument("--allow-rubric-change", action=argparse.BooleanOptionalAction, default=None,
                   help="compare though a judge's rubric content differs (else exit 6)")
    s.add_argument("--allow-missing", action=argparse.BooleanOptionalAction, default=None,
                   help="pass the coverage check though the run lacks answers the baseline has (still listed)")
    s.add_argument("--map", action="append", default=[], metavar="BASE_CELL=CELL", type=_cell_pair,
                   help="pair a baseline cell with this run's differently named cell (repeatable)")
    s.add_argument("--params", default=None, metavar="FILE",
                   help="take the gates: section of this params file (its baseline is relative to the file); "
                        "the options above override its keys")
    s.add_argument("--junit", default=None, metavar="FILE", help="write JUnit XML, one test case per check")
    s.set_defaults(func=_gate)


def _add_judges_command(sub: Any) -> None:
    """Add `bench judges`: each judge's agreement with human reviews and its bias audit (docs/judges.md)."""
    s = sub.add_parser("judges", help="how far each judge can be trusted: agreement with human reviews (kappa, exact, "
                                      "adjacent, with CIs), confusion, bias by grade, the reviewers' own agreement and "
                                      "a bias audit (docs/judges.md)")
    s.add_argument("run_dir", help="runs/<sweep> (or a sweep name)")
    s.add_argument("--json", action="store_true", help="print one JSON document (only that on stdout)")
    s.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of the items (default 2000)")
    s.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    s.add_argument("--min-reviews", type=int, default=10, metavar="N",
                   help="reviewed answers a judge needs before its agreement is given (default 10)")
    s.set_defaults(func=_judges)


def _judges(args: argparse.Namespace) -> int:
    return _lazy("bench.judge_trust.command", "judges_command")(args.run_dir, as_json=args.json, resamples=args.resamples,
                                                           seed=args.seed, min_reviews=args.min_reviews)


def _add_align_command(sub: Any) -> None:
    """Add `bench align`: a judge aligned to a run's blind reviews, written as a new rubric version (docs/align.md)."""
    s = sub.add_parser("align", help="align a judge to a run's blind human reviews: few-shot and anchor-rewrite "
                                     "variants scored by k-fold cross-validation, the best written as a new rubric "
                                     "version (docs/align.md)")
    s.add_argument("run_dir", help="runs/<sweep> (or a sweep name)")
    s.add_argument("--judge", required=True, metavar="ID", help="the judge to align (a rubric-mode judge of the run)")
    s.add_argument("--k", type=int, default=None, help="folds of the cross-validation (default: align.k, else 5)")
    s.add_argument("--params", default=None, metavar="FILE",
                   help="the params file the run was swept with (default: params/<run name>.yaml)")
    s.add_argument("--dry-run", action="store_true", help="print the estimate and stop: nothing is sent")
    s.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of the answers (default 2000)")
    s.add_argument("--no-track", action="store_true", help="do not log the alignment to MLflow")
    s.set_defaults(func=_align)


def _align(args: argparse.Namespace) -> int:
    return _lazy("bench.align.command", "align_command")(args.run_dir, judge=args.judge, k=args.k, params=args.params,
                                                         dry_run=args.dry_run, resamples=args.resamples,
                                                         track=not args.no_track)


def _cell_pair(text: str) -> tuple[str, str]:
    """Return (baseline cell, cell) of ``--map BASE_CELL=CELL``."""
    a, sep, b = text.partition("=")
    if not (sep and a.strip() and b.strip()):
        raise argparse.ArgumentTypeError(f"expected BASE_CELL=CELL (model_id/prompt_id@version on each side), "
                                         f"got {text!r}")
    return a.strip(), b.strip()


def _gate(args: argparse.Namespace) -> int:
    return _lazy("bench.gates.command", "gate_command")(
        args.run_dir, params=args.params, baseline=args.baseline, floor=args.min, max_drop=args.max_drop,
        strict=args.strict, junit=args.junit, mapping=dict(args.map), allow_missing=args.allow_missing,
        alpha=args.alpha, allow_rubric_change=args.allow_rubric_change)


def _reader_gone() -> int:
    """Return 141 (128 + SIGPIPE) once stdout's reader closed the pipe, quietly: the rest goes to /dev/null, or
    the interpreter's last flush would print a BrokenPipeError after ``bench validate … | head``."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


def main(argv: list[str] | None = None) -> int:
    """Run the `bench` command; return its exit status (2 for a bench error, with one clear message)."""
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a reader that went away (`| head`) is met here at the latest, never at exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except BenchError as err:
        print(f"bench {args.command}: error: {redact(str(err))}", file=sys.stderr)  # e.g. an api_base's password
        return err.exit_code if isinstance(err, Halted) else 2  # e.g. 4: limits.budget_usd (bench.core.outcome)
    except KeyboardInterrupt:
        print(f"bench {args.command}: interrupted", file=sys.stderr)
        return 130
