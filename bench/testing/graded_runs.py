"""Run folders of graded answers written directly with the run store: what the gate tests and its calibration read.

``write_run(folder, grades)`` writes, per cell, one answer per scenario and one rubric judgment of it by judge
``grader`` with the grade given (None: a failed judgment), so a test or a simulation states the grades it is about
and gets a folder `bench gate` and `bench compare` read as they read a sweep's, with no model and no subprocess.
The scenarios are ``topic`` t0, t1, … (the same ids in every run written, so two runs pair). ``verdicts`` and
``reviews`` add pairwise battles against a fixed reference answer and blind human reviews (``win_rate_min``,
``agreement_min``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.core.records import Record, Review
from bench.core.store import RunStore
from bench.testing.records import candidate, judgment, scenario

# the rubric every judgment names (bench.testing.records: tip, version 1, hash "h"), snapshotted in the folder as a
# sweep does, so that its 1–5 scale is known to every reader
RUBRIC = """---
id: tip
version: "1"
mode: rubric
criteria:
  - id: quality
    description: How good the tip is.
    scale: [1, 5]
    anchors: {1: useless, 2: weak, 3: fair, 4: good, 5: excellent}
---
Grade the tip.
"""


def write_run(folder: str | Path, grades: Mapping[str, Sequence[float | None]], *, judge_id: str = "grader",
              verdicts: Mapping[str, Sequence[str]] | None = None,
              reviews: Mapping[str, Mapping[str, Sequence[float | str | None]]] | None = None, **judged: Any) -> Path:
    """Write ``folder``: for each cell ``model/p@v1`` of ``grades`` its answer to scenario i and judge
    ``judge_id``'s grade ``grades[cell][i]`` (None: a failed judgment); ``judged`` sets more judgment fields
    (``rubric_hash``, ``judge_model``, …). ``verdicts`` {cell: [verdict]}: pairwise judge ``arena``'s verdict
    ("A>B", …) of the cell's answer (A) against cell ``ref/p@v1``'s answer to the same scenario (B, the same in
    every run, never graded). ``reviews`` {judge_id or "arena": {cell: [grade or verdict, None: not reviewed]}}:
    reviewer ann's blind review of that judgment. Return the folder."""
    folder = Path(folder)
    records: list[Record] = []
    n = max((len(g) for g in grades.values()), default=0)
    scens = [scenario({"topic": f"t{i}"}) for i in range(n)]
    records += scens
    ref = [candidate(s, model_id="ref") for s in scens] if verdicts else []
    records += ref
    for cell, values in grades.items():
        model_id = cell.split("/", 1)[0]
        for i, (s, value) in enumerate(zip(scens, values)):
            c = candidate(s, model_id=model_id)
            done = {judge_id: judgment(c, judge_id=judge_id, error="no JSON found in the reply", error_kind="parse",
                                       **judged) if value is None else
                    judgment(c, judge_id=judge_id, score=float(value), scores={"quality": float(value)}, **judged)}
            if verdicts and cell in verdicts:
                done["arena"] = judgment(c, judge_id="arena", rubric_id="arena", mode="pairwise", order="AB",
                                         candidate_ids=[c.id, ref[i].id], verdict=verdicts[cell][i])
            records += [c, *done.values()]
            for judge, given in (reviews or {}).items():
                j, v = done[judge], given.get(cell, [None] * n)[i]
                grade = {"verdict": v} if j.mode == "pairwise" else {
                    "rubric_id": j.rubric_id, "rubric_version": j.rubric_version, "scores": {"quality": v}, "score": v}
                records += [] if v is None else [Review(judgment_id=j.id, candidate_ids=j.candidate_ids,
                                                        reviewer="ann", blind=True, **grade)]
    RunStore(folder).append(records)
    snapshot = folder / "rubrics" / judged.get("rubric_hash", "h") / f"{judged.get('rubric_id', 'tip')}.md"
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.write_text(RUBRIC, encoding="utf-8")
    return folder
