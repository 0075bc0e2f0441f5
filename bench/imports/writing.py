"""Imported records written to a run folder: every row is checked before anything is written, then the new records
are appended all at once under the folder's lock; those already there (the same content id) are skipped, so
importing a file twice adds nothing."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.core.errors import BenchError
from bench.core.records import Record, Usage
from bench.core.runlock import run_lock
from bench.core.store import RunStore, atomic_write

NO_CALL = Usage(prompt_tokens=0, completion_tokens=0, cost_usd=0.0, calls=0, cache_hits=0)  # bench asked nothing
_SHOWN = 20  # bad rows named in one message
_SAYS = ("output", "verdict", "score", "scores", "error")  # what two rows with one id must say alike


class ImportProblems(BenchError):
    """Rows of an imported file that cannot be read; nothing was written."""

    def __init__(self, source: str, problems: list[str]):
        self.problems = problems
        more = f"\n  … and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
        lines = "\n".join(f"  {source}:{p}" for p in problems[:_SHOWN])
        super().__init__(f"{source}: {len(problems)} bad row(s); nothing was imported:\n{lines}{more}")


def add_records(run_dir: Path, rows: list[tuple[int, Record]], source: str,
                files: Sequence[tuple[str, bytes]] = ()) -> dict[str, int]:
    """Append the records the run folder lacks, all or none, and the ``files`` (path, content) it lacks; return the
    count added per kind and ``already_there``. ImportProblems for an id given twice with other content."""
    run_dir, problems, new = Path(run_dir), [], []
    with run_lock(run_dir):
        store = RunStore(run_dir)
        seen = {r.id: (0, r) for kind in {rec.kind for _n, rec in rows} for r in store.latest(kind).values()}
        there = {rec.id for _n, rec in rows if rec.id in seen}
        for line, rec in rows:
            was_line, was = seen.setdefault(rec.id, (line, rec))
            if was is rec:
                new.append(rec)
            elif [getattr(was, k, None) for k in _SAYS] != [getattr(rec, k, None) for k in _SAYS]:
                where = f"line {was_line}" if was_line else f"the run folder {run_dir}"
                problems.append(f"{line}: its {rec.kind} ({rec.id}) is already given by {where} with another grade "
                                f"or answer; keep one of them, or import it under another judge name or run folder")
        if problems:
            raise ImportProblems(source, problems)
        _append_all(store, new)
        for rel, data in files:
            if not (run_dir / rel).exists():
                atomic_write(run_dir / rel, data, shared=True)
    added = Counter(f"{r.kind}s" for r in new)
    return {k: added.get(k, 0) for k in ("scenarios", "candidates", "judgments")} | {"already_there": len(there)}


def _append_all(store: RunStore, records: list[Record]) -> None:
    """Append ``records`` to their files; if any write fails, cut every file back to its size before."""
    sizes = {p: (p.stat().st_size if p.is_file() else None) for p in {store.path(r.kind) for r in records}}
    try:
        store.append(records)
    except BaseException:
        for path, size in sizes.items():
            with contextlib.suppress(OSError):  # the append's own error is the one to report
                if size is not None:
                    os.truncate(path, size)
                elif path.is_file():
                    path.unlink()
        raise
