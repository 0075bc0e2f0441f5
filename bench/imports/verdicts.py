"""`bench import verdicts FILE`: another tool's pairwise verdicts or graded scores (JSONL or CSV) as bench records:
a pair a scenario holding both responses (as a sweep of a pair dataset writes it), a graded row a scenario, its
answer a candidate and the grade a judgment of judge ``judge``. Columns: docs/judges.md."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from bench.config.ids import ID_HELP, is_id
from bench.config.rubrics import Rubric
from bench.core.records import Candidate, Judgment, Record, Scenario, content_hash
from bench.imports.rubric_files import graded_rubric, pairwise_rubric, snapshot
from bench.imports.writing import NO_CALL, ImportProblems, add_records

VERDICTS = ("A>B", "B>A", "A=B", "A>>B", "B>>A")  # in the original numbering: A is response_a
_MIRROR = {"A>B": "B>A", "B>A": "A>B", "A=B": "A=B", "A>>B": "B>>A", "B>>A": "A>>B"}
PAIRWISE = ("id", "question", "response_a", "response_b", "label", "judge", "order", "verdict", "category")
GRADED = ("id", "question", "response", "judge", "score", "scores", "label", "expected", "model", "category")
_NEED = {"pairwise": ("id", "question", "response_a", "response_b", "judge"),
         "graded": ("id", "question", "response", "judge")}


def import_verdicts(path: str | Path, run_dir: str | Path, scale: tuple[int, int] | None = None) -> dict[str, Any]:
    """Import the verdicts of ``path`` into ``run_dir`` (``scale``: graded rows'); return what was added.
    ImportProblems (nothing written) names every bad row by its line."""
    source = str(path)
    rows, problems = read_rows(Path(path))
    kind = "pairwise" if rows and "response_a" in rows[0][1] else "graded"
    checked = []
    for line, row in rows:
        try:
            checked.append((line, _checked(row, kind, scale)))
        except ValueError as err:
            problems.append((line, f"{line}: {err}"))
    grades = [r["scores"] for _n, r in checked] if kind == "graded" else []
    rubric, text = pairwise_rubric() if kind == "pairwise" else graded_rubric(
        sorted({c for g in grades for c in g}) or ["score"], [v for g in grades for v in g.values()], scale)
    records, items = [], {}
    for line, row in checked:
        made = (_pair if kind == "pairwise" else _graded)(row, rubric, source, line)
        was_line, was = items.setdefault(made[0].fields["id"], (line, made[0].id))
        if was != made[0].id:  # one id, two scenarios: its verdicts would not be read as one item's
            problems.append((line, f"{line}: id {made[0].fields['id']!r} has another question, response or label "
                                   f"on line {was_line}; give each item one id, and its rows the same text and label"))
        records += [(line, r) for r in made]
    if problems or not rows:
        raise ImportProblems(source, [p for _n, p in sorted(problems)] or [
            "1: no rows; give one JSON object per line, or a CSV header and rows (docs/judges.md)"])
    return {"kind": kind, "rows": len(rows), **add_records(Path(run_dir), records, source, [snapshot(rubric, text)])}


def read_rows(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    """Return (line, row with lower-case keys) of a JSONL or CSV file, and (line, problem) of each bad JSONL line."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise ImportProblems(str(path), [f"1: cannot be read ({err}); give a UTF-8 JSONL or CSV file"]) from None
    rows, bad = [], []
    if path.suffix.lower() == ".csv":
        reader, start = csv.DictReader(io.StringIO(text, newline="")), 2
        for row in reader:
            rows.append((start, {k if k is None else str(k).strip().lower(): v for k, v in row.items()}))
            start = reader.line_num + 1
        return rows, bad
    for n, line in enumerate(text.splitlines(), 1):
        try:
            obj = json.loads(line) if line.strip() else {}
        except ValueError as err:
            bad.append((n, f"{n}: not JSON ({err}); write one JSON object per line (a .csv file is read as CSV)"))
            continue
        if not isinstance(obj, dict):
            bad.append((n, f"{n}: a JSON {type(obj).__name__}, not an object; write one object per line"))
        elif obj:
            rows.append((n, {str(k).strip().lower(): v for k, v in obj.items()}))
    return rows, bad


def _checked(row: dict[str, Any], kind: str, scale: tuple[int, int] | None) -> dict[str, Any]:
    """Return the row's non-empty values, a graded row's grades under ``scores``; ValueError naming a bad column."""
    allowed = PAIRWISE if kind == "pairwise" else GRADED
    unknown = sorted(set(row) - set(allowed) - {None})
    if unknown or None in row:
        raise ValueError(f"unknown column(s) {', '.join(unknown) or 'without a header'} for {kind} verdicts; "
                         f"the columns are {', '.join(allowed)}")
    given = {k: v for k, v in row.items() if v is not None and v != ""}
    missing = [k for k in _NEED[kind] if k not in given]
    if missing:
        raise ValueError(f"no {', '.join(missing)}; every {kind} row needs {', '.join(_NEED[kind])}")
    if kind == "pairwise":
        order = str(given.get("order", "AB")).strip().upper()
        if order not in ("AB", "BA"):
            raise ValueError(f"order {given['order']!r} is neither AB (response_a shown first) nor BA (shown second)")
        return {**given, "order": order, **{k: _label(given[k], k) for k in ("label", "verdict") if k in given}}
    if "label" in given and "expected" in given:
        raise ValueError("both label and expected; give one (a pass/fail label or an expected score)")
    scores = _scores(given.get("scores"))
    score = _number(given["score"], "score") if "score" in given else None
    grades = scores or ({"score": score} if score is not None else {})
    off = [f"{k} {v:g}" for k, v in grades.items() if scale and not scale[0] <= v <= scale[1]]
    if off:
        raise ValueError(f"{', '.join(off)} outside the scale {scale[0]}–{scale[1]} given (--scale); fix the grade "
                         f"or the scale")
    composite = score if score is not None else (sum(scores.values()) / len(scores) if scores else None)
    return {**given, "scores": grades, "score": composite}


def _label(value: Any, what: str) -> str:
    text = str(value).strip()
    if text not in VERDICTS:
        raise ValueError(f"{what} {value!r} is none of {', '.join(VERDICTS)} (A is response_a, in the original order)")
    return text


def _judgment(row: dict[str, Any], rubric: Rubric, source: str, line: int, **fields: Any) -> Judgment:
    judge = str(row["judge"])
    return Judgment(judge_id=judge, judge_model=f"imported/{judge}", rubric_id=rubric.id, rubric_version=rubric.version,
                    rubric_hash=rubric.hash, mode=rubric.mode, usage=NO_CALL,
                    details={**fields.pop("details", {}), "imported_from": source, "line": line}, **fields)


def _pair(row: dict[str, Any], rubric: Rubric, source: str, line: int) -> list[Record]:
    order, verdict = row["order"], row.get("verdict")
    reference = {k: v for k, v in row.items() if k in ("label", "category")}
    s = Scenario(fields={"id": str(row["id"]), "question": str(row["question"]),
                         "response_A": str(row["response_a"]), "response_B": str(row["response_b"])},
                 reference=reference or None, source=f"imported from {source}")
    grade = ({"verdict": verdict, "details": {"shown_verdict": verdict if order == "AB" else _MIRROR[verdict]}}
             if verdict else {"error": "the imported verdict is empty (the judge gave none)", "error_kind": "imported"})
    return [s, _judgment(row, rubric, source, line, candidate_ids=[f"{s.id}:A", f"{s.id}:B"], scenario_id=s.id,
                         order=order, **grade)]


def _graded(row: dict[str, Any], rubric: Rubric, source: str, line: int) -> list[Record]:
    truth = {k: row[k] for k in ("label", "expected", "category") if k in row}
    s = Scenario(fields={"id": str(row["id"]), "question": str(row["question"])}, source=f"imported from {source}",
                 reference={("label" if k == "expected" else k): v for k, v in truth.items()} or None)
    model = str(row.get("model", "imported"))
    c = Candidate(model_id=model, model=f"imported/{model}", prompt_id="imported", prompt_version="1",
                  prompt_hash=content_hash("imported"), scenario_id=s.id, output=str(row["response"]), usage=NO_CALL,
                  messages=[{"role": "user", "content": str(row["question"])}])
    grade = ({"score": row["score"], "scores": row["scores"]} if row["score"] is not None else
             {"error": "the imported row has no score (the judge gave none)", "error_kind": "imported"})
    return [s, c, _judgment(row, rubric, source, line, candidate_ids=[c.id], scenario_id=s.id, **grade)]


def _scores(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    if not isinstance(value, dict) or not value:
        raise ValueError('scores is not an object of criterion to score, e.g. {"clarity": 4, "accuracy": 5}')
    odd = [str(k) for k in value if not is_id(str(k))]
    if odd:
        raise ValueError(f"scores key(s) {', '.join(map(repr, odd))}: a criterion {ID_HELP}")
    return {str(k): _number(v, f"scores.{k}") for k, v in value.items()}


def _number(value: Any, what: str) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(f"{what} {value!r} is not a finite number; give a number (leave score empty for a failed "
                         f"grade)")
    return number
