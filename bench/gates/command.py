"""`bench gate RUN` and the gates at a sweep's end: evaluate, print the table, write JUnit, return the exit code
(5: a check failed, 6: cannot decide, 0: all passed, 2: a missing baseline or a bad section)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from bench.config.params import load_sweep
from bench.core import paths
from bench.core.errors import BenchError, ParamsError
from bench import gates as gate_api  # its evaluation, table and JUnit load polars on first use (bench.cli stays cheap)
from bench.gates.floors import parse_min
from bench.gates.spec import Gates, merge
from bench.run import Run, shown_path


def gate_command(run_dir: str, *, params: str | None = None, baseline: str | None = None,
                 floor: float | list[str] | None = None,
                 max_drop: float | None = None, strict: bool | None = None, junit: str | None = None,
                 mapping: dict[str, str] | None = None, allow_missing: bool | None = None,
                 alpha: float | None = None, allow_rubric_change: bool | None = None) -> int:
    """Run `bench gate`: print every check, write ``junit`` if asked; return 0, 5 or 6.
    ``strict``/``allow_missing``: None keeps the params file's setting (else False)."""
    file_gates, params_path = None, None
    if params:
        sweep, params_path = load_sweep(paths.resolve(params))
        file_gates = sweep.gates
    try:
        gates = merge(file_gates, min=parse_min([str(f) for f in floor]) if isinstance(floor, list) else floor, max_drop=max_drop, baseline=baseline, map=mapping,
                      strict=strict, allow_missing=allow_missing, alpha=alpha,
                      allow_rubric_change=allow_rubric_change)
    except ValueError as err:
        where = f" (nor a gates: section in {params_path})" if params_path and file_gates is None else ""
        raise BenchError(f"{err}{where}") from None
    if baseline:
        base = _folder(baseline)
    else:
        base = file_gates.baseline_dir(params_path) if file_gates is not None else None
        if params_path is not None:
            check_baseline(gates, params_path)
    report = gate_api.evaluate_gates(_folder(run_dir), gates, base)
    return _show(report, junit)


def _folder(arg: str) -> Path:
    """Return the run folder ``arg`` names: a path, else a sweep name under ``runs/`` (as `bench compare` reads it)."""
    path = paths.resolve(arg)
    if not path.is_dir() and "/" not in arg and paths.run_dir(arg).is_dir():
        return paths.run_dir(arg)
    return path


def check_baseline(gates: Gates | None, params_path: Path) -> None:
    """Raise ParamsError when a params file's ``gates.baseline`` names no run folder (before a sweep spends)."""
    base = gates.baseline_dir(params_path) if gates is not None else None
    if base is not None and not base.is_dir():
        raise ParamsError(f"{params_path}: gates.baseline: {base} is not a run folder (relative to the params "
                          f"file's folder; a run of the baseline's params, e.g. main's, kept or restored from a cache)")


def sweep_gates(run: Run, junit: str | None = None) -> int:
    """Apply a sweep's ``gates:`` to its run's current cells: print the table, write ``junit``; return 0 or 5."""
    gates = run.sweep.gates
    if gates is None:
        return 0
    base = gates.baseline_dir(run.params_path)
    try:
        report = gate_api.evaluate_gates(run.dir, gates, base, cells=[c.key for c in run.cells], own_sweep=True)
    except (BenchError, OSError, ValueError) as err:
        print(f"gates: could not be evaluated: {err}", file=sys.stderr, flush=True)
        why = gate_api.GateResult("evaluation", "(every gate)", math.nan, None, None, None, 0, False,
                                  f"not evaluated: {err}")
        report = gate_api.GateReport(run.dir, base, gates.strict, [why], alpha=gates.alpha)
    return _show(report, junit)


def _show(report: gate_api.GateReport, junit: str | None) -> int:
    print(gate_api.gate_table(report), flush=True)
    if junit:
        print(f"junit: {shown_path(gate_api.write_junit(report, junit))}", flush=True)
    return report.exit_code
