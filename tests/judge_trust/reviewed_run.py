"""A run made by a real sweep on the fake provider, reviewed through `bench review export/apply` by two reviewers:
what the `bench judges` and the report's Judges section tests read.

Models m1 and m2 answer twelve scenarios; "grader" grades every answer on tip-v1, "arena" judges m1 against m2.
Reviewer ann reviews every answer and every pair; bob the first twelve answers. The reviews are blind (a blind
export: only blind reviews measure agreement); each reviewer's grade is derived from the judge's stored grade of the
same answer, read from the run's records: most confirmed, some moved by one point (``SHIFT``), so the kappa is high
but not 1 and the two reviewers disagree a little.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from bench.analysis import COMPOSITE, load_run
from bench.testing.grids import generate, grid, judge, model
from bench.testing.in_process import command, run_stages

SCENARIOS = 12
SHIFT = {"ann": 3, "bob": 4}  # every n-th reviewed entry: one point up (down at the top of the scale)
BOB_REVIEWS = 12  # bob reviews the first twelve answers: the items of the ceiling


def reviewed_run(tmp: Path, url: str, *, name: str = "judged", reviewers: tuple[str, ...] = ("ann", "bob"),
                 report: bool = False) -> Path:
    """Sweep the grid into ``tmp/runs/<name>`` (rendering its report at the end with ``report``: before any review),
    review it as ``reviewers`` (none: left unreviewed); return the run."""
    path = grid(tmp / f"{name}.yaml", url, name=name,
                models=[model("m1", url, name="good"), model("m2", url, name="ref")],
                scenarios=generate(topic=[f"topic {i}" for i in range(SCENARIOS)]),
                judges=[judge("grader", url, name="judge"),
                        judge("arena", url, rubric="arena-pairwise", name="judge", baseline="m2/p@v1")])
    out = run_stages(tmp, path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = tmp / "runs" / name
    if report:  # what the sweep renders at its end
        out = command(tmp, "report", str(run))
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for reviewer in reviewers:
        review(tmp, run, reviewer)
    return run


def judge_grades(run: Path, judge_id: str) -> dict[tuple[str, ...], dict[str, float] | str]:
    """Return the judge's stored grades in the run by answer (candidate ids, as a review entry's ``answer``): its
    criteria scores (first repeat), or its verdict (first repeat, the pair asked in the order AB)."""
    t = load_run(run)
    scores = t.scores.filter((pl.col("judge") == judge_id) & (pl.col("repeat") == 0)
                             & (pl.col("criterion") != COMPOSITE))
    out: dict[tuple[str, ...], dict[str, float] | str] = {}
    for r in scores.iter_rows(named=True):
        out.setdefault((r["candidate"],), {})[r["criterion"]] = r["value"]  # type: ignore[index]
    verdicts = t.judgments.filter((pl.col("judge") == judge_id) & (pl.col("mode") == "pairwise")
                                  & (pl.col("repeat") == 0) & (pl.col("order") != "BA")
                                  & pl.col("verdict").is_not_null())
    out |= {(a, b): v for a, b, v in verdicts.select("candidate", "candidate_b", "verdict").iter_rows()}
    return out


def review(tmp: Path, run: Path, reviewer: str) -> None:
    """Review the run blind as ``reviewer`` through `bench review export` and `bench review apply`, each grade
    derived from the judge's stored grade of the same answer (the export shows none)."""
    file = tmp / f"{run.name}-{reviewer}.json"
    out = command(tmp, "review", "export", str(run), str(file))
    assert out.returncode == 0, out.stderr
    doc = json.loads(file.read_text())
    assert doc["blind"] is True and not any("judges" in e for e in doc["entries"])
    doc["reviewer"] = reviewer
    grader, arena = judge_grades(run, "grader"), judge_grades(run, "arena")
    graded = [e for e in doc["entries"] if e["mode"] != "pairwise"]
    for n, e in enumerate(graded[:BOB_REVIEWS] if reviewer == "bob" else graded):
        scores = grader[tuple(e["answer"])]
        e["review"] = {"scores": {c: _shifted(v, e["scale"][c], n % SHIFT[reviewer] == 0) for c, v in scores.items()}}
    if reviewer != "bob":
        for n, e in enumerate(e for e in doc["entries"] if e["mode"] == "pairwise"):
            said = arena[tuple(e["answer"])]
            e["review"] = {"verdict": ("B>A" if said.startswith("A") else "A>B") if n % SHIFT[reviewer] == 0 else said}
    file.write_text(json.dumps(doc))
    out = command(tmp, "review", "apply", str(run), str(file))
    assert out.returncode == 0, out.stderr


def _shifted(value: float, scale: list[float], move: bool) -> float:
    if not move:
        return value
    return value + 1 if value < scale[1] else value - 1
