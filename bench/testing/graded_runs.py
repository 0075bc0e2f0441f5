"""Run folders of graded answers written directly with the run store, for the gate tests and its calibration: a
test states the grades it is about and gets a folder `bench gate` and `bench compare` read as a sweep's, with no
model and no subprocess. Scenarios are ``topic`` t0, t1, … in every run written, so two runs pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.core.records import Record, Review
from bench.core.store import RunStore
from bench.testing.records import candidate, judgment, scenario

# the rubric every judgment names (tip, version 1, hash "h"), snapshotted as a sweep does: its 1–5 scale known
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
    """Write ``folder``: per cell ``model/p@v1`` its answer to scenario i and ``judge_id``'s grade ``grades[cell][i]``
    (None: failed; ``judged``: more fields). ``verdicts`` {cell: [verdict]}: judge ``arena``'s against cell
    ``ref/p@v1``'s answer; ``reviews`` {judge_id or "arena": {cell: [grade or verdict]}}: ann's blind reviews."""
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
