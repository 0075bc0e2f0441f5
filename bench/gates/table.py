"""The gate table the terminal shows: every check with its value, its interval, its bound and its verdict."""

from __future__ import annotations

import math

from bench.gates.evaluate import GateReport, GateResult
from bench.run import shown_path

HEADER = ("gate", "checked", "value", "{level} CI", "p_holm", "bound", "verdict")


def gate_table(report: GateReport) -> str:
    """Return the whole gate printout of ``report`` as text (no trailing newline)."""
    lines = [f"warning: {w}" for w in report.warnings]
    base = f" against {shown_path(report.baseline)}" if report.baseline is not None else ""
    rule = (f"strict: a check passes only when keeping its bound is shown, each at alpha {report.alpha:g}"
            if report.strict else f"a check fails only when breaking its bound is shown: its one-sided test, Holm "
                                  f"across the checks, below alpha {report.alpha:g}, and its CI beyond the bound")
    if any(r.gate == "max_drop" for r in report.results):
        rule += "; max_drop's value is this run − the baseline"
    lines.append(f"gates of {shown_path(report.run_dir)}{base} ({rule}):")
    header = tuple(h.format(level=f"{1 - report.alpha:.0%}") for h in HEADER)
    rows = [header] + [_row(r) for r in report.results]
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
    p = "" if r.p_holm is None else f"{r.p_holm:.3g}"
    return (r.gate, r.subject, value, ci, p, bound, "pass" if r.passed else "FAIL" if r.decided else "UNDECIDED")
