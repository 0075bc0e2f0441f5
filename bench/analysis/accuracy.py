"""Judge accuracy against ground truth (a scenario's ``label`` or an ``automated`` judge's reference checks): the
share of a judge's judgments that agree; a failed or ungraded one disagrees (as in JudgeBench)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from bench.analysis._inputs import require
from bench.analysis.agreement import cohen_kappa
from bench.analysis.agreement_bootstrap import agreement_draws
from bench.analysis.bootstrap import bootstrap_ratios, percentile_interval
from bench.analysis.scales import UNIT, _snapshots, judge_scales
from bench.analysis.tables import RunTables
from bench.config.checks import checks_with_reference

LABEL = "label"  # the reference key a dataset's ground-truth label goes under
CATEGORY_KEYS = ("category", "source")  # a scenario's category: the first of these it has (reference, then fields)
ALL = "all"  # the category of the overall row
CHECK_PASS = 0.5  # an answer is correct by the reference checks when their composite reaches this
_UNIT_MODES = ("checklist", "automated", "hybrid", "pairwise")  # modes whose composite is on 0–1 (pairwise: none)
AGREEMENT_SCHEMA = {"judge": pl.Utf8, "against": pl.Utf8, "scenario": pl.Utf8, "category": pl.Utf8,
                    "judgment": pl.Utf8, "truth": pl.Utf8, "decision": pl.Utf8, "agree": pl.Float64,
                    "note": pl.Utf8,  # why the judge is left out (its agree is then null)
                    "order": pl.Utf8, "pair": pl.Utf8}  # pairwise: the order shown, the pair both orders share
ACCURACY_SCHEMA = {"judge": pl.Utf8, "against": pl.Utf8, "category": pl.Utf8, "accuracy": pl.Float64,
                   "ci_low": pl.Float64, "ci_high": pl.Float64, "n": pl.Int64, "agree": pl.Int64,
                   "no_grade": pl.Int64, "scenarios": pl.Int64, "note": pl.Utf8,
                   "accuracy_ab": pl.Float64, "accuracy_ba": pl.Float64, "accuracy_both_orders": pl.Float64,
                   "kappa": pl.Float64, "kappa_ci_low": pl.Float64, "kappa_ci_high": pl.Float64}
_BY_ORDER_KAPPA = ("accuracy_ab", "accuracy_ba", "accuracy_both_orders", "kappa", "kappa_ci_low", "kappa_ci_high")
_ORDINAL = {"A>B": 1.0, "A=B": 0.0, "B>A": -1.0, "pass": 1.0, "fail": 0.0}  # sides and pass/fail, for kappa
_SIDES = {"a>b": "A>B", "a>>b": "A>B", "b>a": "B>A", "b>>a": "B>A", "a=b": "A=B", "a": "A>B", "b": "B>A",
          "tie": "A=B", "model_a": "A>B", "model_b": "B>A", "response_a": "A>B", "response_b": "B>A"}
_PASS = {"true": True, "pass": True, "passed": True, "yes": True, "correct": True,
         "false": False, "fail": False, "failed": False, "no": False, "incorrect": False}
_MIRROR = {"A>B": "B>A", "B>A": "A>B", "A=B": "A=B"}  # a side as shown in the swapped order, in the original
_MIRRORED = ("A>>B", "A>B", "A=B", "B>A", "B>>A")  # verdict labels the judge stores in the original order


def side(value: Any, names_a: Sequence[Any] = (), names_b: Sequence[Any] = ()) -> str | None:
    """Return ``A>B``, ``B>A`` or ``A=B`` for a pairwise label or verdict (``names_a``/``names_b``: what else names
    side A or B, e.g. its cell and model id), None when it says none of them."""
    if value is None:
        return None
    text = str(value).strip()
    if text in {str(n) for n in names_a if n is not None}:
        return "A>B"
    if text in {str(n) for n in names_b if n is not None}:
        return "B>A"
    return _SIDES.get(text.lower())


def graded_truth(value: Any, scores: bool = False) -> bool | float | None:
    """Return a graded judge's label as pass/fail (True/False) or an expected score (float); None if neither.
    ``0``/``1`` (numbers or text) are fail/pass, unless ``scores`` (the run's labels are expected scores)."""
    if isinstance(value, bool):
        return value
    number = _number(value)
    if number is not None:
        return bool(number) if number in (0.0, 1.0) and not scores else number
    text = str(value).strip().lower() if value is not None else ""
    return _PASS.get(text)


def labels_are_scores(values: Any) -> bool:
    """Return whether numeric labels are expected scores: some label is a number other than 0 and 1."""
    return any((n := _number(v)) is not None and n not in (0.0, 1.0) for v in values)


def _number(value: Any) -> float | None:
    """Return a label's finite number (a bool or a pass/fail word is none), else None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value) if isinstance(value, (int, float)) else float(str(value).strip())
    except ValueError:
        return None
    return number if np.isfinite(number) else None


def label_sides(labels: Sequence[str]) -> dict[str, str] | str:
    """Return each of a rubric's verdict labels' side as shown (``A>B``, ``A=B``, ``B>A``), or why they have none:
    a label's own words (:func:`side`), else its place (first half A, last half B, an odd middle a tie)."""
    n = len(labels)
    place = ["A>B" if 2 * i < n - 1 else "B>A" if 2 * i > n - 1 else "A=B" for i in range(n)]
    said = [side(label) for label in labels]
    if all(said):
        return dict(zip(labels, said))  # type: ignore[arg-type]
    if any(s is not None and s != p for s, p in zip(said, place)):
        return (f"left out: its verdict labels ({', '.join(labels)}) do not read as first = A better, last = B "
                f"better (the middle one a tie), so which side a verdict prefers is unknown")
    return {label: s or p for label, s, p in zip(labels, said, place)}


def _category(scenario: Any, keys: Sequence[str]) -> str | None:
    for key in keys:
        for where in (scenario.reference or {}, scenario.fields):
            if where.get(key) is not None:
                return str(where[key])
    return None


def label_agreement(t: RunTables, *, label: str = LABEL, category: Sequence[str] = CATEGORY_KEYS,
                    pass_at: float | Mapping[str, float] | None = None, score_tolerance: float = 0.5,
                    checks: bool = True) -> pl.DataFrame:
    """Return one row per judgment that has a ground truth: judge, against, scenario, category, judgment, truth,
    decision, agree (1, 0, or null with a ``note``); ``pass_at``: the composite a graded judgment passes at."""
    labels = {sid: s.reference[label] for sid, s in t.scenarios.items() if s.reference and label in s.reference}
    checkers = reference_checkers(t) if checks else {}
    if not labels and not checkers:  # nothing to measure against (and no column of the tables is read)
        return pl.DataFrame(schema=AGREEMENT_SCHEMA)
    bar = _pass_marks(t, pass_at)
    rows = _pairwise_rows(t, labels, f"reference.{label}") + _graded_rows(t, labels, bar, score_tolerance,
                                                                          f"reference.{label}")
    for truth_judge, weights in checkers.items():
        rows += _check_rows(t, truth_judge, weights, bar)
    categories, skip = {sid: _category(s, category) for sid, s in t.scenarios.items()}, not_measured(t)
    return pl.DataFrame([{"note": None, "order": None, "pair": None, **r, "category": categories.get(r["scenario"])}
                         for r in rows if r["judge"] not in skip], schema=AGREEMENT_SCHEMA)


def grades_correctness(rubric: Any) -> bool:
    """Return whether a rubric's judge is measured against ground truth: its ``accuracy``, else whether it is
    pairwise, shows the judge a reference (or ``solve_first``) or checks against one."""
    if rubric.accuracy is not None:
        return bool(rubric.accuracy)
    return (rubric.mode == "pairwise" or bool(rubric.reference) or rubric.solve_first
            or bool(checks_with_reference(rubric.checks)))


def not_measured(t: RunTables) -> dict[str, str]:
    """Return the judges left out of accuracy, each with why: their rubric (its snapshot in the run folder) does not
    grade correctness. A judge whose rubric is not in the run folder (imported verdicts) is measured."""
    out: dict[str, str] = {}
    if not t.run_dir or t.judgments.is_empty():
        return out
    for judge, key in t.judgments.select("judge", "rubric").unique().sort("judge", "rubric").iter_rows():
        rubrics = _snapshots(t.run_dir, str(key))
        if rubrics and not any(grades_correctness(r) for r in rubrics):
            out[judge] = (f"its rubric {key} does not grade correctness (no reference shown or checked): no accuracy; "
                          f"set accuracy: true in its front matter to measure it against the ground truth")
    return out


def _pairwise_rows(t: RunTables, labels: dict[str, Any], against: str) -> list[dict[str, Any]]:
    pw = t.judgments.filter((pl.col("mode") == "pairwise") & pl.col("scenario").is_in(list(labels)))
    model_of = dict(zip(t.candidates["id"].to_list(), t.candidates["model"].to_list()))
    readings = _verdict_readings(t, pw)
    rows = []
    for j in pw.iter_rows(named=True):
        names_a, names_b = (j["cell"], j["model"]), (j["cell_b"], model_of.get(j["candidate_b"]))
        truth = side(labels[j["scenario"]], names_a, names_b)
        if truth is None:
            continue
        reading = readings.get(j["judge"])
        note = reading if isinstance(reading, str) else None
        decision = None if note or j["error"] is not None else _verdict_side(j, reading)
        rows.append({"judge": j["judge"], "against": against, "scenario": j["scenario"], "judgment": j["id"],
                     "truth": truth, "decision": decision, "agree": None if note else float(decision == truth),
                     "note": note, "order": j["order"],
                     "pair": f"{j['scenario']}|{j['sample']}|{j['cell']}|{j['cell_b']}|{j['repeat']}"})
    return rows


def _verdict_readings(t: RunTables, pw: pl.DataFrame) -> dict[str, dict[str, str] | str | None]:
    """Return per pairwise judge how verdicts read as sides: None (default labels), each label's side, or why none."""
    found: dict[str, list[dict[str, str] | str | None]] = {}
    for judge, key in pw.select("judge", "rubric").unique().sort("judge", "rubric").iter_rows():
        rubrics = _snapshots(t.run_dir, str(key)) if t.run_dir else []
        if not rubrics:
            odd = sorted(set(pw.filter(pl.col("judge") == judge)["verdict"].drop_nulls()) - set(_MIRRORED))
            found.setdefault(judge, []).append(None if not odd else (
                f"left out: its rubric {key} is not in the run folder, so its verdict labels ({', '.join(odd)}) "
                f"cannot be read as sides"))
        for rubric in rubrics:
            default = set(rubric.labels) <= set(_MIRRORED)
            found.setdefault(judge, []).append(None if default else label_sides(rubric.labels))
    out: dict[str, dict[str, str] | str | None] = {}
    for judge, readings in found.items():  # one rubric (version) each, as a rule
        why = next((r for r in readings if isinstance(r, str)), None)
        sides = [r for r in readings if isinstance(r, dict)]
        out[judge] = why or ({k: v for r in sides for k, v in r.items()} if sides else None)
    return out


def _verdict_side(j: dict[str, Any], reading: dict[str, str] | None) -> str | None:
    """Return the side a pairwise judgment's verdict prefers, in the original order (None: it names none)."""
    if reading is None or (j["shown_verdict"] is None and j["verdict"] in _MIRRORED):
        return side(j["verdict"])
    shown = j["shown_verdict"] if j["shown_verdict"] is not None else j["verdict"]
    said = reading.get(shown) or (side(shown) if shown in _MIRRORED else None)
    return _MIRROR[said] if said is not None and j["order"] == "BA" else said


def _graded_rows(t: RunTables, labels: dict[str, Any], bar: dict[str, float], tolerance: float,
                 against: str) -> list[dict[str, Any]]:
    graded = t.judgments.filter((pl.col("mode") != "pairwise") & pl.col("scenario").is_in(list(labels)))
    scores = labels_are_scores(labels.values())  # 0/1 are pass/fail unless other numbers make them scores
    rows = []
    for j in graded.iter_rows(named=True):
        truth = graded_truth(labels[j["scenario"]], scores)
        if truth is None:
            continue
        score = j["score"] if j["error"] is None else None
        if isinstance(truth, bool):
            decision = None if score is None else score >= bar.get(j["judge"], 0.5)
            shown = ("pass" if truth else "fail", None if decision is None else ("pass" if decision else "fail"))
            agree = decision is not None and decision == truth
        else:
            shown = (f"{truth:g}", None if score is None else f"{score:g}")
            agree = score is not None and abs(score - truth) <= tolerance
        rows.append({"judge": j["judge"], "against": against, "scenario": j["scenario"], "judgment": j["id"],
                     "truth": shown[0], "decision": shown[1], "agree": float(agree)})
    return rows


def _check_rows(t: RunTables, truth_judge: str, weights: dict[str, float], bar: dict[str, float]
                ) -> list[dict[str, Any]]:
    """Return the rows of every graded LLM judge against the answers ``truth_judge``'s reference checks (``weights``:
    check id → weight) pass: their weighted mean ≥ ``CHECK_PASS``, its other checks left out."""
    w = pl.col("criterion").replace_strict(weights, default=0.0, return_dtype=pl.Float64)
    by_judgment = (t.scores.filter((pl.col("judge") == truth_judge) & pl.col("criterion").is_in(list(weights)))
                   .group_by("candidate", "judgment").agg(((pl.col("value") * w).sum() / w.sum()).alias("reference")))
    correct = by_judgment.group_by("candidate").agg((pl.col("reference").mean() >= CHECK_PASS).alias("correct"))
    truth = dict(zip(correct["candidate"].to_list(), correct["correct"].to_list()))
    graded = t.judgments.filter(~pl.col("mode").is_in(["pairwise", "automated"]) & pl.col("candidate").is_in(list(truth)))
    rows = []
    for j in graded.iter_rows(named=True):
        score = j["score"] if j["error"] is None else None
        decision = None if score is None else score >= bar.get(j["judge"], 0.5)
        ok = truth[j["candidate"]]
        rows.append({"judge": j["judge"], "against": f"checks of {truth_judge}", "scenario": j["scenario"],
                     "judgment": j["id"], "truth": "pass" if ok else "fail",
                     "decision": None if decision is None else ("pass" if decision else "fail"),
                     "agree": float(decision is not None and decision == ok)})
    return rows


def reference_checkers(t: RunTables) -> dict[str, dict[str, float]]:
    """Return the automated judges of a run whose rubric (its snapshot in the run folder) checks against a reference,
    each with the weight of every such check by id (those with a weight only: a check weighing 0 decides nothing)."""
    if not t.run_dir or "mode" not in t.judgments.columns:
        return {}
    auto = t.judgments.filter(pl.col("mode") == "automated").select("judge", "rubric").unique().sort("judge")
    out: dict[str, dict[str, float]] = {}
    for judge, key in auto.iter_rows():
        weights = {c.id: float(c.weight) for r in _snapshots(t.run_dir, str(key))
                   for c in checks_with_reference(r.checks) if c.weight > 0}
        if weights:
            out.setdefault(judge, {}).update(weights)
    return out


def _pass_marks(t: RunTables, pass_at: float | Mapping[str, float] | None) -> dict[str, float]:
    """Return per judge the composite its judgments pass at: ``pass_at``, else the middle of its composite scale
    (its rubric's, else 0–1 for checklist, automated and hybrid, else its observed range)."""
    judges = t.judgments["judge"].unique().to_list()
    if isinstance(pass_at, (int, float)):
        return {j: float(pass_at) for j in judges}
    given = dict(pass_at or {})
    scales = judge_scales(t.run_dir, t.judgments) if t.run_dir else {}
    observed = (t.judgments.group_by("judge").agg(pl.col("score").min().alias("lo"), pl.col("score").max().alias("hi"),
                                                   pl.col("mode").is_in(list(_UNIT_MODES)).all().alias("unit")))
    out = {}
    for j, lo, hi, unit in observed.iter_rows():
        seen = UNIT if unit or lo is None else (lo, hi)
        lo, hi = scales.get(j, {}).get("composite", seen)
        out[j] = float(given.get(j, (lo + hi) / 2))
    return out


def judge_accuracy(t: RunTables | pl.DataFrame, *, resamples: int = 1000, seed: int = 0, level: float = 0.95,
                   **options: Any) -> pl.DataFrame:
    """Return per judge, ground truth and category (``all`` first): accuracy with its bootstrap interval, counts,
    per-order accuracy of a pairwise judge, Cohen's kappa against the truth. ``t``: tables or agreement rows."""
    rows = t if isinstance(t, pl.DataFrame) else label_agreement(t, **options)
    require(rows, ["judge", "against", "scenario", "category", "decision", "agree"], "judge_accuracy", "agreement")
    rows = rows.with_columns(pl.lit(None, pl.Utf8).alias(c) for c in ("truth", "order", "pair")
                             if c not in rows.columns)
    out = [_left_out(g, j, a) if "note" in g.columns and g["note"].drop_nulls().len() else
           _accuracy(g, j, a, resamples, seed, level)
           for (j, a), g in rows.group_by(["judge", "against"], maintain_order=True)]
    if not out:
        return pl.DataFrame(schema=ACCURACY_SCHEMA)
    return pl.concat(out).sort("judge", "against", pl.col("category") != ALL, "category")


def _left_out(g: pl.DataFrame, judge: str, against: str) -> pl.DataFrame:
    """Return the one row of a judge left out of accuracy against ``against``: no accuracy, its judgments and why."""
    return pl.DataFrame([{"judge": judge, "against": against, "category": ALL, "n": g.height,
                          "scenarios": g["scenario"].n_unique(), "note": g["note"].drop_nulls()[0]}],
                        schema=ACCURACY_SCHEMA)


def _accuracy(g: pl.DataFrame, judge: str, against: str, resamples: int, seed: int, level: float) -> pl.DataFrame:
    """Return one judge's accuracy against one ground truth: overall and per category, with bootstrap intervals."""
    cats = sorted(c for c in g["category"].unique().to_list() if c is not None)
    scenarios = g["scenario"].unique(maintain_order=True).to_list()
    s_index = {s: i for i, s in enumerate(scenarios)}
    num, den = np.zeros((len(scenarios), 1 + len(cats))), np.zeros((len(scenarios), 1 + len(cats)))
    no_grade = np.zeros(1 + len(cats))
    c_index = {c: i + 1 for i, c in enumerate(cats)}
    for s, c, decision, agree in g.select("scenario", "category", "decision", "agree").iter_rows():
        for k in (0, c_index[c]) if c is not None else (0,):
            num[s_index[s], k] += agree
            den[s_index[s], k] += 1
            no_grade[k] += decision is None
    with np.errstate(invalid="ignore", divide="ignore"):
        point = num.sum(axis=0) / den.sum(axis=0)
    lo, hi = percentile_interval(bootstrap_ratios(num, den, resamples, seed), level)
    parts = [g, *(g.filter(pl.col("category") == c) for c in cats)]
    by_order = [_by_order(part) for part in parts]
    kappas = [_kappa(part, resamples, seed, level) for part in parts]
    return pl.DataFrame({"judge": judge, "against": against, "category": [ALL, *cats], "accuracy": point,
                         "ci_low": lo, "ci_high": hi, "n": den.sum(axis=0).astype(np.int64),
                         "agree": num.sum(axis=0).astype(np.int64), "no_grade": no_grade.astype(np.int64),
                         "scenarios": (den > 0).sum(axis=0).astype(np.int64), "note": None,
                         **{k: [o[i % 3] for o in (by_order if i < 3 else kappas)]
                            for i, k in enumerate(_BY_ORDER_KAPPA)}},
                        schema=ACCURACY_SCHEMA)


def _by_order(g: pl.DataFrame) -> tuple[float | None, ...]:
    """Return a pairwise judge's accuracy on the verdicts asked in order AB, in order BA, and the share of pairs
    asked in both orders that it got right in both (None each for a graded judge)."""
    shown = g.filter(pl.col("order").is_in(["AB", "BA"]))
    if shown.is_empty():
        return None, None, None
    ab, ba = (shown.filter(pl.col("order") == o)["agree"].mean() for o in ("AB", "BA"))
    both = (shown.group_by("pair").agg(pl.col("order").n_unique().alias("orders"), pl.col("agree").min())
            .filter(pl.col("orders") == 2)["agree"].mean())
    return ab, ba, both  # type: ignore[return-value]


def _kappa(g: pl.DataFrame, resamples: int, seed: int, level: float) -> tuple[float | None, ...]:
    """Return Cohen's kappa of the judge's decisions against the ground truth (quadratic on sides; pass/fail)
    with its bootstrap interval over scenarios; None for expected scores."""
    rows = g.filter(pl.col("decision").is_not_null() & pl.col("truth").is_in(list(_ORDINAL))
                    & pl.col("decision").is_in(list(_ORDINAL)))
    if rows.is_empty():
        return None, None, None
    x, y = (rows[c].replace_strict(_ORDINAL, return_dtype=pl.Float64).to_numpy() for c in ("decision", "truth"))
    lo, hi = agreement_draws(x, y, rows["scenario"].to_numpy(), weights="quadratic", resamples=resamples,
                             seed=seed).interval("kappa", level)
    return cohen_kappa(x, y, weights="quadratic"), lo, hi
