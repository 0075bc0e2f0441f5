"""Floors per judge and criterion: what ``--min`` checks (``--min V``, ``--min JUDGE=V``, ``--min J.CRITERION=V``);
a bare floor over judges of different scales is refused."""

from __future__ import annotations

from pathlib import Path

from bench.config.rubrics import run_scales
from bench.core.errors import BenchError
from bench.core.paths import project_root
from bench.core.records import Judgment
from bench.core.reviewed import COMPOSITE
from bench.core.store import RunStore

Floors = dict[tuple[str, str], float]  # (judge, criterion or "composite") -> floor


def parse_min(values: list[str] | None) -> float | dict[str, float] | None:
    """Return `bench gate`'s ``--min`` options as the ``min`` key: one bare number, or {JUDGE[.CRITERION]: V}.
    Raises BenchError on a value that is neither, or a bare number mixed with per-judge floors."""
    if not values:
        return None
    bare, named = [], {}
    for v in values:
        key, sep, number = v.rpartition("=")
        try:
            value = float(number)
        except ValueError:
            raise BenchError(f"--min {v!r}: expected a number, JUDGE=VALUE or JUDGE.CRITERION=VALUE") from None
        if sep and not key.strip():
            raise BenchError(f"--min {v!r}: name the judge before '=' (JUDGE=VALUE)")
        (named.__setitem__(key.strip(), value) if sep else bare.append(value))
    if bare and (named or len(bare) > 1):
        raise BenchError("--min: give one bare floor (every judge) or JUDGE=VALUE floors, not both")
    return bare[0] if bare else named


def judge_scales(run_dir: Path) -> dict[str, set[tuple[float, float]]]:
    """Return each scoring judge's composite scales in the run folder, from its judgments' rubric snapshots."""
    rubrics: dict[str, set[tuple[str, str]]] = {}
    for rec in RunStore(run_dir).raw(Judgment):
        if rec.get("mode") != "pairwise" and isinstance(rec.get("judge_id"), str):
            rubrics.setdefault(rec["judge_id"], set()).add((str(rec.get("rubric_id")), str(rec.get("rubric_hash"))))
    out: dict[str, set[tuple[float, float]]] = {}
    for judge, pairs in rubrics.items():
        kinds = [type("R", (), {"rubric_id": i, "rubric_hash": h}) for i, h in pairs]
        scales = run_scales(run_dir, kinds, project_root())
        out[judge] = {s[COMPOSITE] for s in scales.values() if COMPOSITE in s}
    return out


def floors_of(spec: float | dict[str, float], run_dir: Path, judges: list[str]) -> Floors:
    """Return the floor of each (judge, criterion) ``spec`` sets over the run's scoring ``judges``. Raises
    BenchError for a judge the run lacks, and for a bare floor over judges on different composite scales."""
    if not isinstance(spec, dict):
        scales = {j: s for j, s in judge_scales(run_dir).items() if j in judges and s}
        if len({x for s in scales.values() for x in s}) > 1:
            listed = ", ".join(f"{j} {'/'.join(f'{lo:g}–{hi:g}' for lo, hi in sorted(s))}"
                               for j, s in sorted(scales.items()))
            raise BenchError(f"--min {spec:g}: the run's judges grade on different scales ({listed}): one floor "
                             f"cannot fit them all; give one per judge: --min JUDGE=VALUE (gates: {{min: {{JUDGE: "
                             f"VALUE}}}} in a params file)")
        return {(j, COMPOSITE): float(spec) for j in judges}
    floors: Floors = {}
    for key, value in spec.items():
        judge, _, criterion = key.partition(".")
        if judge not in judges:
            raise BenchError(f"--min {key}={value:g}: the run has no scoring judge {judge!r}; its judges: "
                             f"{', '.join(judges) or 'none'}")
        floors[(judge, criterion or COMPOSITE)] = float(value)
    return floors
