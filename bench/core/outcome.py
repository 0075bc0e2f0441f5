"""How a run ended: the items still failed, grouped (stage × model or judge × error kind), and the exit code.
An item is failed when its latest record is a failure and it never succeeded."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.core.digests import set_aside_ids
from bench.core.exit_codes import ExitCode
from bench.core.journal import read_repeats
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore

# the codes, with their meanings, are bench.core.exit_codes.ExitCode: these names are its values, as plain ints
EXIT_OK = int(ExitCode.OK)
EXIT_CRASHED = int(ExitCode.CRASHED)
EXIT_BAD_INPUT = int(ExitCode.BAD_INPUT)
EXIT_FAILED_ITEMS = int(ExitCode.FAILED_ITEMS)
EXIT_BUDGET = int(ExitCode.BUDGET)
EXIT_INTERRUPTED = int(ExitCode.INTERRUPTED)


@dataclass(frozen=True)
class FailureGroup:
    """Failed items of one stage, one model (collect) or judge (judge) and one error kind."""

    stage: str
    who: str
    kind: str
    count: int
    exhausted: int  # of ``count``: tried limits.max_attempts times, so a re-run leaves them failed
    first_error: str

    def as_dict(self) -> dict:
        return asdict(self)


def failures(run_dir: str | Path, max_attempts: int | None = None) -> list[FailureGroup]:
    """Return the run's failed items grouped by (stage, model or judge, error kind), largest first; items of an
    earlier content of a cell, judge or rubric version are set aside (bench.core.digests): no re-run asks them."""
    store = RunStore(Path(run_dir))
    aside = set_aside_ids(Path(run_dir))
    groups: dict[tuple[str, str, str], list] = {}
    for stage, kind in (("collect", Candidate), ("judge", Judgment)):
        tries = store.attempts(kind)
        for rec in (r for r in store.failed(kind).values() if r.id not in aside):
            who = rec.model_id if stage == "collect" else rec.judge_id
            key = (stage, who, rec.error_kind or "unknown")
            entry = groups.setdefault(key, [0, 0, rec.error or ""])
            entry[0] += 1
            entry[1] += bool(max_attempts and tries.get(rec.id, 0) >= max_attempts)
    rows = [FailureGroup(s, w, k, n, x, first) for (s, w, k), (n, x, first) in groups.items()]
    return sorted(rows, key=lambda g: (g.stage != "collect", -g.count, g.who, g.kind))


def failed_by_cell(run_dir: str | Path) -> dict[str, dict[str, int]]:
    """Return per cell key how many of its items are failed now: ``collect`` (its answers) and ``judge`` (the
    judgments of its answers; a pairwise one counts for its first answer's cell). Set-aside items are left out."""
    store = RunStore(Path(run_dir))
    aside = set_aside_ids(Path(run_dir))
    cell_of = {c.id: c.cell for c in store.latest(Candidate).values()}
    out: dict[str, dict[str, int]] = {}
    for rec in store.failed(Candidate).values():
        if rec.id not in aside:
            counts = out.setdefault(rec.cell, {"collect": 0, "judge": 0})
            counts["collect"] += 1
    for rec in store.failed(Judgment).values():
        cell = cell_of.get(rec.candidate_ids[0]) if rec.candidate_ids else None
        if rec.id not in aside and cell is not None:
            counts = out.setdefault(cell, {"collect": 0, "judge": 0})
            counts["judge"] += 1
    return out


def row_format(rows: list[tuple[str, ...]], text_columns: int = 3) -> str:
    """Return a format string that aligns ``rows``: the first ``text_columns`` left, numbers right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "  ".join(f"{{:{'<' if i < text_columns else '>'}{w}}}" for i, w in enumerate(widths))


def failure_table(groups: Iterable[FailureGroup], width: int = 320) -> str:
    """Return the groups as an aligned text table, with each group's first error on its own line."""
    groups = list(groups)
    if not groups:
        return "no failed items"
    head = ("stage", "model/judge", "error kind", "items", "gave up")
    rows = [(g.stage, g.who, g.kind, str(g.count), str(g.exhausted or "")) for g in groups]
    fmt = row_format([head, *rows])
    lines = [fmt.format(*head)]
    for g, row in zip(groups, rows):
        lines.append(fmt.format(*row))
        first = " ".join(g.first_error.split())
        lines.append(f"    first error: {first[:width - 17]}{'…' if len(first) > width - 17 else ''}")
    return "\n".join(lines)


def retry_command(params: str | Path, *, cells: str | None = None, run_dir: str | None = None,
                  jobs: int = 1, only_stage: str | None = None) -> str:
    """Return the exact `bench sweep` command that asks the failed items again (and only those)."""
    parts = ["bench", "sweep", str(params)]
    for flag, value in (("--cells", cells), ("--run-dir", run_dir), ("--only-stage", only_stage)):
        if value:
            parts += [flag, str(value)]
    if jobs > 1:
        parts += ["--jobs", str(jobs)]
    return shlex.join(parts)


def repeats_since(run_dir: str | Path, since: str) -> int:
    """Return the requests an earlier stop left in flight that stages started since ``since`` asked again."""
    events = read_repeats(run_dir).get("events", [])
    return sum(int(e.get("in_flight_repeats", 0)) for e in events if str(e.get("time", "")) >= since)


def summary(groups: list[FailureGroup], retry: str, max_attempts: int) -> str:
    """Return the closing summary of a run with failed items: the table and how to retry them."""
    n = sum(g.count for g in groups)
    gave_up = sum(g.exhausted for g in groups)
    lines = [f"{n} item(s) failed:", failure_table(groups), f"retry them (a re-run asks only failed items, "
             f"each as a fresh request): {retry}"]
    if gave_up:
        lines.append(f"{gave_up} of them were tried limits.max_attempts={max_attempts} times and are not asked "
                     f"again; raise limits.max_attempts in the params file to retry them")
    return "\n".join(lines)
