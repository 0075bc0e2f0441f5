"""The gate table the terminal shows: every check with its value, its interval, its bound and its verdict.

What the comparison said (a judge or rubric version that differs from the baseline's: the scores then
measure different things; answers found in one run only) comes first, and the closing line says how many
checks failed.
"""

from __future__ import annotations

import math

from bench.gates.evaluate import GateReport, GateResult
from bench.run import shown_path

HEADER = ("gate", "checked", "value", "95% CI", "bound", "verdict")


def gate_table(report: GateReport) -> str:
    """Return the whole gate printout of ``report`` as text (no trailing newline)."""
    lines = [f"warning: {w}" for w in report.warnings]
    base = f" against {shown_path(report.baseline)}" if report.baseline is not None else ""
    rule = "strict: the point estimate decides" if report.strict else "a bound is broken only when the CI says so"
    if any(r.gate == "max_drop" for r in report.results):
        rule += "; max_drop's value is this run − the baseline"
    lines.append(f"gates of {shown_path(report.run_dir)}{base} ({rule}):")
    rows = [HEADER] + [_row(r) for r in report.results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    for row, result in zip(rows, [None, *report.results]):
        text = "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
        lines.append(text if result is None else f"{text}  {result.reason}")
    lines.append(report.line())
    return "\n".join(lines)


def _row(r: GateResult) -> tuple[str, ...]:
    ci = "" if r.ci_low is None or r.ci_high is None else f"[{r.ci_low:.3f}, {r.ci_high:.3f}]"
    value = "n/a" if r.value is None else f"{r.value:.3f}"
    bound = "" if math.isnan(r.bound) else f"drop ≤ {r.bound:g}" if r.gate == "max_drop" else f"≥ {r.bound:g}"
    return (r.gate, r.subject, value, ci, bound, "pass" if r.passed else "FAIL")
