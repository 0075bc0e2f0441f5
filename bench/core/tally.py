"""Progress of a run read from its run folder: answers and judgments counted as workers append them
(only complete new lines, an id seen twice once)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from bench.core.records import cell_key, versioned
from bench.core.store import RunStore

CHUNK = 8 << 20  # bytes read at a time: a first refresh of a large run folder never holds a whole file
CHECK = 32  # bytes before the offset read again to check the file is still the one counted (not cut and rewritten)
HEAD = 64  # bytes of the last counted line's start read again with them: a record's id is in its first 64


@dataclass
class Counts:
    """Records of one group (a cell, a judge) by their latest state: ``ok`` and ``failed``."""

    ok: int = 0
    failed: int = 0

    @property
    def done(self) -> int:
        """Finished items: successes and failures (a failure is final for this sweep; a later one asks again)."""
        return self.ok + self.failed

    def add(self, ok: bool, n: int = 1) -> None:
        if ok:
            self.ok += n
        else:
            self.failed += n

    def merge(self, other: Counts) -> Counts:
        """Add ``other``'s counts to these; return self."""
        self.ok += other.ok
        self.failed += other.failed
        return self


@dataclass
class _File:
    offset: int = 0  # bytes consumed: every complete line before it has been counted
    inode: int = -1  # another file at the same path (replaced, not appended to) is read from its start
    tail: bytes = b""  # the last CHECK bytes before ``offset``, as counted
    head: bytes = b""  # the first HEAD bytes of the last line counted (its record id: records' tails can be alike)
    head_at: int = 0  # where that line starts
    seen: tuple[int, int] = (-1, -1)  # (size, mtime_ns) when last read: unchanged means nothing to read


@dataclass(frozen=True)
class Planned:
    """What a sweep plans: answers ``per_model``, ``judgments`` (None: unknown), counted ``cells``, ``rubrics``
    (None: all)."""

    per_model: dict[str, int]
    judgments: int | None = None
    cells: frozenset[str] | None = None
    rubrics: frozenset[tuple[str, str]] | None = None


@dataclass
class StoreTally:
    """Answers per cell and judgments per (judge, rubric) of one run folder, read incrementally."""

    run_dir: Path
    answers: dict[str, Counts] = field(default_factory=dict, init=False)  # cell key -> counts
    judgments: dict[tuple[str, str], Counts] = field(default_factory=dict, init=False)  # (judge, rubric key)
    bytes_read: int = field(default=0, init=False)
    last_read: int = field(default=0, init=False)
    duplicates: int = field(default=0, init=False)
    unreadable: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        self._store = RunStore(self.run_dir)
        self._files: dict[Path, _File] = {}
        self._state: dict[str, dict[str, tuple[object, bool]]] = {"candidate": {}, "judgment": {}}  # id -> (key, ok)
        self._pairs: dict[tuple[object, bool], tuple[object, bool]] = {}  # one (key, ok) tuple shared by its ids

    def refresh(self) -> int:
        """Count what was appended since the last refresh (new shard files included); return the bytes read."""
        n = 0
        for kind in ("candidate", "judgment"):
            for path in self._store.files(kind):
                n += self._read_new(path, kind)
        self.bytes_read += n
        self.last_read = n
        return n

    def _read_new(self, path: Path, kind: str) -> int:
        """Read ``path`` from its offset; count the complete lines; keep the offset after the last one."""
        try:
            st = path.stat()
        except FileNotFoundError:  # listed, then removed (a test's cleanup, a re-keying): nothing to count
            return 0
        state = self._files.setdefault(path, _File())
        if (st.st_size, st.st_mtime_ns) == state.seen:
            return 0
        if st.st_size < state.offset or st.st_ino != state.inode:  # cut back (a failed write undone) or
            state.offset, state.inode, state.tail = 0, st.st_ino, b""  # replaced: read again; ids count once
        with open(path, "rb") as fh:
            read = 0
            if state.tail:  # the bytes before the offset must be the ones counted: a file cut back and grown
                fh.seek(state.offset - len(state.tail))  # again past the offset (a failed write undone, then
                read = len(check := fh.read(len(state.tail)))  # others) is read anew; the last line's start
                fh.seek(state.head_at)  # holds its record's id, where every record of a kind may end alike
                read += len(head := fh.read(len(state.head)))
                if check != state.tail or head != state.head:
                    state.offset, state.tail, state.head, state.head_at = 0, b"", b"", 0
                    fh.seek(0)
                else:
                    fh.seek(state.offset)
            read += self._read_lines(fh, state, st, kind)
        return read

    def _read_lines(self, fh: BinaryIO, state: _File, st: os.stat_result, kind: str) -> int:
        """Count the complete lines from ``state.offset`` to the size ``st`` saw; move the offset after the last."""
        limit, read, rest, waiting = st.st_size - state.offset, 0, b"", False
        while read < limit and not waiting and (chunk := fh.read(min(CHUNK, limit - read))):
            read += len(chunk)
            data = rest + chunk
            end, waiting = _complete(data)
            for line in data[:end].split(b"\n")[:-1]:
                self._count(kind, line)
            if end:
                start = data.rfind(b"\n", 0, end - 1) + 1  # the last complete line's start (0: it began in rest)
                state.head_at, state.head = state.offset + start, data[start:min(end - 1, start + HEAD)]
                state.offset += end
                state.tail = data[end - CHECK:end] if end >= CHECK else (state.tail + data[:end])[-CHECK:]
            rest = data[end:]
        # what was read, torn last line included: unchanged size and time next time means nothing to read
        state.seen = (-1, -1) if waiting else (state.offset + len(rest), st.st_mtime_ns)
        return read

    def _count(self, kind: str, line: bytes) -> None:
        """Count one record line under the rule of RunStore.latest: a success once there is one, else a failure."""
        if not line.strip():
            return
        key = _key(kind, line)
        if key is None:
            self.unreadable += 1
            return
        rid, group, ok = key
        seen = self._state[kind]
        counts = self.answers if kind == "candidate" else self.judgments
        prev = seen.get(rid)
        if prev is not None:
            self.duplicates += 1
            if prev == (group, ok) or (prev[1] and not ok):  # the same, or a failure after a success: no change
                return
            counts[prev[0]].add(prev[1], -1)
        seen[rid] = self._pairs.setdefault((group, ok), (group, ok))  # a large run keeps only ids, not tuples
        counts.setdefault(group, Counts()).add(ok)  # type: ignore[arg-type]

    def by_model(self, cells: frozenset[str] | set[str] | None = None) -> dict[str, Counts]:
        """Return answers per model id, over ``cells`` (None: every cell in the folder)."""
        out: dict[str, Counts] = {}
        for cell, counts in self.answers.items():
            if cells is None or cell in cells:
                out.setdefault(cell.split("/", 1)[0], Counts()).merge(counts)
        return out

    def by_judge(self, rubrics: frozenset[tuple[str, str]] | set[tuple[str, str]] | None = None) -> dict[str, Counts]:
        """Return judgments per judge id, of the (judge id, rubric key) pairs in ``rubrics`` (None: all)."""
        out: dict[str, Counts] = {}
        for pair, counts in self.judgments.items():
            if rubrics is None or pair in rubrics:
                out.setdefault(pair[0], Counts()).merge(counts)
        return out


def _complete(data: bytes) -> tuple[int, bool]:
    """Return the length of the complete lines of ``data``, and whether a NUL (NFS: not yet written) stopped them."""
    nul = data.find(b"\0")
    return data.rfind(b"\n", 0, len(data) if nul < 0 else nul) + 1, nul >= 0


def _key(kind: str, line: bytes) -> tuple[str, object, bool] | None:
    """Return (record id, group, ok) of one record line, or None if it is not a record of ``kind``."""
    try:
        rec = json.loads(line)
        rid = rec["id"]
        if kind == "candidate":
            group: object = cell_key(rec["model_id"], rec["prompt_id"], rec["prompt_version"])
        else:
            group = (rec["judge_id"], versioned(rec["rubric_id"], rec["rubric_version"]))
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(rid, str) or not rid:
        return None
    return rid, group, rec.get("error") is None


def _pct(done: int, total: int) -> str:
    return f"{100 * done / total if total else 100.0:.0f}%"


def progress_line(tally: StoreTally, totals: Planned | dict[str, int], judgments: int | None = None) -> str:
    """Return one line: ``collect 340/800 (42%) · gpt-x 170/400 · llama 170/400 · judged 300/800 · failed 3``.
    ``totals``: a Planned, or the answers planned per model (then ``judgments`` is the total)."""
    plan = totals if isinstance(totals, Planned) else Planned(dict(totals), judgments)
    models = tally.by_model(plan.cells)
    judges = tally.by_judge(plan.rubrics)
    parts, failed = [], 0
    if plan.per_model:
        mine = [models.get(m, Counts()) for m in plan.per_model]
        done, total = sum(c.done for c in mine), sum(plan.per_model.values())
        failed += sum(c.failed for c in mine)
        parts.append(f"collect {done}/{total} ({_pct(done, total)})")
        parts += [f"{m} {c.done}/{n}" for (m, n), c in zip(plan.per_model.items(), mine)]
    if plan.judgments is not None or judges:
        done = sum(c.done for c in judges.values())
        failed += sum(c.failed for c in judges.values())
        text = f"judged {done}" if plan.judgments is None else \
            f"judged {done}/{plan.judgments} ({_pct(done, plan.judgments)})"
        if len(judges) > 1:
            text += " (" + ", ".join(f"{j} {c.done}" for j, c in sorted(judges.items())) + ")"
        parts.append(text)
    parts.append(f"failed {failed}")
    return " · ".join(parts)

