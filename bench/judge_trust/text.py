"""The tables `bench judges` prints: the JSON document of :mod:`bench.judge_trust.document`, read as a person reads it
(each value with its interval in brackets, every note and verdict on its own)."""

from __future__ import annotations

from typing import Any

import polars as pl

from bench.report.display import number, table_text

AGREEMENT_SHOWN = ("criterion", "n", "items", "kappa", "exact", "adjacent", "state")


def judges_text(doc: dict[str, Any], reviewed: str = "") -> str:
    """Return the document as the tables `bench judges` prints."""
    lines = [f"run {doc['run']}: {reviewed or str(doc['reviews']) + ' reviews'}; {doc['resamples']} bootstrap "
             f"resamples, seed {doc['seed']}, {round(doc['level'] * 100)}% intervals"]
    if doc.get("not_blind_reviews"):
        lines.append(f"only blind reviews count: {doc['not_blind_reviews']} review(s) saved with the judges shown "
                     f"are left out")
    lines.append("")
    for j in doc["judges"]:
        lines += [f"judge {j['judge']}", _accuracy_line(j),
                  "  agreement with blind human reviews (kappa: quadratic on scores and on verdicts by their order; "
                  "exact; adjacent: within one point, or never opposite winners):"]
        lines += _indented(_agreement_frame(j["agreement"]))
        lines += [f"  - {r['criterion']}: {r['note']}" for r in j["agreement"] if r.get("note")]
        if j["bias_by_level"]:
            lines.append("  bias by human grade (judge − human; negative: harsher than the reviewers):")
            lines += _indented(pl.DataFrame([{"criterion": r["criterion"], "human": r["human_score"], "n": r["n"],
                                              "mean_bias": _with_ci(r["mean_bias"], r["ci_low"], r["ci_high"])}
                                             for r in j["bias_by_level"]]))
        lines += ["  bias audit:", *_indented(_audit_frame(j["audit"])), ""]
    lines.append("reviewers' own agreement (Krippendorff's alpha on the answers two or more reviewed: the ceiling):")
    if doc["reviewer_ceiling"]:
        lines += _indented(pl.DataFrame([{"rubric": r["rubric"], "criterion": r["criterion"],
                                          "reviewers": r["reviewers"], "items": r["items"],
                                          "alpha": _with_ci(r["alpha"], r["ci_low"], r["ci_high"]),
                                          "state": r["state"], "note": r["note"] or ""}
                                         for r in doc["reviewer_ceiling"]]))
    else:
        lines.append("  no reviews yet (notebooks/04_review.ipynb, or bench review export/apply)")
    return "\n".join(lines)


def _accuracy_line(j: dict[str, Any]) -> str:
    """Return the judge's accuracy line: against what, pooled with its interval, per order, on both orders, kappa."""
    if j.get("accuracy") is None:
        return f"  accuracy: none ({j.get('accuracy_note') or 'no ground truth'})"
    top = next(r for r in j["ground_truth"] if r["category"] == "all" and r["against"] == j["accuracy_against"])
    line = (f"  accuracy against {top['against']}: {_with_ci(top['accuracy'], top['ci_low'], top['ci_high'])} "
            f"over {top['n']}")
    if j.get("accuracy_by_order"):
        order = j["accuracy_by_order"]
        line += (f"; shown AB {number(order['AB'], 2)}, BA {number(order['BA'], 2)}, right in both orders "
                 f"{number(j['accuracy_both_orders'], 2)}")
    return line + f"; kappa against it {_with_ci(top['kappa'], top['kappa_ci_low'], top['kappa_ci_high'])}"


def _with_ci(value: float | None, lo: float | None, hi: float | None) -> str:
    """Return "0.71 [0.52, 0.85]", the value alone without an interval, "—" without a value."""
    if value is None:
        return "—"
    return number(value, 2) + ("" if lo is None or hi is None else f" [{number(lo, 2)}, {number(hi, 2)}]")


def _agreement_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame([{"criterion": r["criterion"], "n": r["n"], "items": r["items"],
                          "kappa": _with_ci(r["kappa"], r["ci_low"], r["ci_high"]),
                          "exact": _with_ci(r["exact"], r["exact_ci_low"], r["exact_ci_high"]),
                          "adjacent": _with_ci(r["adjacent"], r["adjacent_ci_low"], r["adjacent_ci_high"]),
                          "state": r["state"]} for r in rows], schema={c: pl.Utf8 for c in AGREEMENT_SHOWN}
                        | {"n": pl.Int64, "items": pl.Int64})


def _audit_frame(audit: dict[str, dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame([{"measure": name, "value": _with_ci(m.get("value"), m.get("ci_low"), m.get("ci_high")),
                          "n": m.get("n"), "state": m.get("state"), "verdict": m.get("verdict") or ""}
                         for name, m in audit.items()],
                        schema={"measure": pl.Utf8, "value": pl.Utf8, "n": pl.Int64, "state": pl.Utf8,
                                "verdict": pl.Utf8})


def _indented(frame: pl.DataFrame) -> list[str]:
    if frame.is_empty():
        return ["  (none)"]
    return ["  " + line for line in table_text(frame, max_rows=200).splitlines()]
