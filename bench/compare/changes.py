"""What changed between two runs besides the answers: a rubric's content under one id (refused unless
``--allow-rubric-change``), a cell's model or endpoint (a warning)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore


def _records(run_dir: Path | None, kind: type) -> Iterator[dict[str, Any]]:
    """Yield the run's records of ``kind`` as written (none without a run folder)."""
    return iter(()) if run_dir is None else RunStore(run_dir).raw(kind)


def rubric_hashes(run_dir: Path | None) -> dict[tuple[str, str], set[str]]:
    """Return per (judge, rubric id) the rubric content hashes of the run's judgments."""
    out: dict[tuple[str, str], set[str]] = {}
    for rec in _records(run_dir, Judgment):
        if isinstance(rec.get("judge_id"), str) and rec.get("rubric_id") is not None:
            out.setdefault((rec["judge_id"], str(rec["rubric_id"])), set()).add(str(rec.get("rubric_hash")))
    return out


def rubric_changes(run_a: Path | None, run_b: Path | None) -> list[str]:
    """Return a line per judge and rubric id graded with different rubric contents in the two runs."""
    ha, hb = rubric_hashes(run_a), rubric_hashes(run_b)
    return [f"judge {judge}: rubric {rid} has different content in the two runs (hash {', '.join(sorted(ha[k]))} in "
            f"run A, {', '.join(sorted(hb[k]))} in run B): its grades measure different things"
            for k in sorted(ha.keys() & hb.keys()) if ha[k] != hb[k] for judge, rid in [k]]


def refuse_rubric_changes(run_a: Path | None, run_b: Path | None, allowed: bool) -> list[str]:
    """Return the rubric changes as warnings when ``allowed``; raise BenchError naming them when not."""
    changed = rubric_changes(run_a, run_b)
    if changed and not allowed:
        raise BenchError("; ".join(changed) + ". Compare them anyway with --allow-rubric-change (gates: "
                         "allow_rubric_change: true), or re-judge one run with the other's rubric")
    return changed


def cell_changes(run_a: Path | None, run_b: Path | None) -> list[str]:
    """Return a line per cell both runs answered whose model string or endpoint differs between them."""
    def served(run_dir: Path | None) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for rec in _records(run_dir, Candidate):
            if rec.get("error") is None and rec.get("model_id") and rec.get("prompt_id"):
                cell = f"{rec['model_id']}/{rec['prompt_id']}@{rec.get('prompt_version')}"
                out.setdefault(cell, set()).add(f"{rec.get('model')}" + (f" at {rec['endpoint']}"
                                                                          if rec.get("endpoint") else ""))
        return out
    sa, sb = served(run_a), served(run_b)
    return [f"cell {cell}: answered by {' and '.join(sorted(sa[cell]))} in run A, {' and '.join(sorted(sb[cell]))} "
            f"in run B: a changed model or endpoint, not only the change under test"
            for cell in sorted(sa.keys() & sb.keys()) if sa[cell] != sb[cell]]
