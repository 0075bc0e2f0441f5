"""One content per name in a run folder: each cell, judge and rubric version stands for one digest. A second
digest is refused (exit 2) unless superseding: earlier records are then set aside, but kept."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from bench.core.errors import ParamsError
from bench.core.records import (Candidate, Judgment, Record, cell_key, content_hash, hashed_mode, utc_now,
                                versioned)
from bench.core.store import RunStore, json_lines

LOG = Path("digests") / "supersede.jsonl"  # append-only: one line per name a sweep superseded
Name = tuple[str, str]  # ("cell" | "judge" | "rubric", its key)
_ENDPOINTS_SINCE = 2  # schema 2: records carry their endpoint (bench.core.migrate re-keys older ones)
_CHANGED = {"model": "the model string", "endpoint": "the endpoint", "params": "the generation params",
            "prompt": "the prompt's template", "mode": "the grading mode", "text": "the rubric's text"}
_WAY_OUT = {"cell": "bump the prompt's version (prompts[].version) or give the model entry a new id (models[].id)",
            "judge": "give the judge a new id (judges[].id)",
            "rubric": "bump the rubric's version (its front matter)"}


class MixedRunWarning(UserWarning):
    """A run folder holds records of two contents under one name (written before bench refused that)."""


@dataclass(frozen=True)
class Digest:
    """What one name (a cell, a judge, a rubric version) stands for: ``value`` digests ``parts``."""

    what: str
    key: str
    parts: dict[str, Any]
    value: str

    @property
    def name(self) -> Name:
        return (self.what, self.key)


def cell_digest(key: str, model: str, endpoint: str | None, params: dict[str, Any], prompt_hash: str) -> Digest:
    """Return the digest of a cell: its model string, endpoint, generation params and prompt template."""
    parts = {"model": model, "endpoint": endpoint or None, "params": dict(params or {}), "prompt": prompt_hash}
    return Digest("cell", key, parts, content_hash(parts, 12))


def judge_digest(judge_id: str, model: str, endpoint: str | None, params: dict[str, Any], mode: str) -> Digest:
    """Return the digest of a judge: its model string, endpoint, params (the pack size included) and mode.
    The packed mode is hashed under its old name (``hashed_mode``), so older supersede logs still match."""
    parts = {"model": model, "endpoint": endpoint or None, "params": dict(params or {}), "mode": mode}
    hashed, hashed_params = hashed_mode(mode, parts["params"])
    return Digest("judge", judge_id, parts, content_hash({**parts, "params": hashed_params, "mode": hashed}, 12))


def rubric_digest(key: str, rubric_hash: str) -> Digest:
    """Return the digest of a rubric version: its content hash (the name of its snapshot in the run folder)."""
    return Digest("rubric", key, {"text": rubric_hash}, rubric_hash)


def digests_of(rec: Record) -> list[Digest]:
    """Return the digests a record was made under: a candidate's cell; a judgment's judge and rubric version."""
    if isinstance(rec, Candidate):
        return [cell_digest(rec.cell, rec.model, rec.endpoint, rec.params, rec.prompt_hash)]
    if isinstance(rec, Judgment):
        return [judge_digest(rec.judge_id, rec.judge_model, rec.judge_endpoint, rec.judge_params, rec.mode),
                rubric_digest(rec.rubric_key, rec.rubric_hash)]
    return []


@dataclass
class Held:
    """The records of one digest of a name: how many, the latest ``created_at``, that record's parts."""

    records: int = 0
    latest: str = ""
    parts: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunDigests:
    """Every digest each name has in a run folder, and the digests sweeps chose with ``--supersede``."""

    held: dict[Name, dict[str, Held]]
    chosen: dict[Name, str]  # the supersede log: the latest line of each name wins

    @classmethod
    def of(cls, run_dir: Path, records: Iterable[Record]) -> RunDigests:
        """Return the digests of ``records`` (a run folder's candidates and judgments) with its supersede log."""
        memo: dict[tuple, list[Digest]] = {}
        return cls.made(run_dir, ((_digests_memo(rec, memo), rec.created_at) for rec in records))

    @classmethod
    def made(cls, run_dir: Path, made: Iterable[tuple[list[Digest], str]]) -> RunDigests:
        """Return the digests of records given as (the digests each was made under, its ``created_at``)."""
        tally: dict[int, list] = {}  # id(digests) -> [digests, records, latest created_at, position of its last]
        for n, (digests, created_at) in enumerate(made):
            t = tally.get(id(digests))
            if t is None:
                tally[id(digests)] = [digests, 1, created_at, n]
                continue
            t[1] += 1
            if created_at >= t[2]:
                t[2], t[3] = created_at, n
        held: dict[Name, dict[str, Held]] = {}
        last: dict[tuple[Name, str], int] = {}
        for digests, records, latest, at in tally.values():
            for d in digests:
                h = held.setdefault(d.name, {}).setdefault(d.value, Held())
                h.records += records
                if (latest, at) >= (h.latest, last.get((d.name, d.value), -1)):
                    h.latest, h.parts, last[(d.name, d.value)] = latest, d.parts, at
        return cls(held, {(e["what"], e["key"]): e["digest"] for e in read_log(run_dir)})

    def current(self, name: Name) -> str | None:
        """Return the digest a name stands for: the one a sweep superseded to, else its latest record's."""
        if name in self.chosen:
            return self.chosen[name]
        held = self.held.get(name)
        return max(held, key=lambda d: held[d].latest) if held else None

    def conflicts(self, planned: Iterable[Digest]) -> list[tuple[Digest, str]]:
        """Return each planned digest that differs from its name's current one, with that current digest."""
        out: dict[Name, tuple[Digest, str]] = {}
        for d in planned:
            now = self.current(d.name)
            if now is not None and now != d.value:
                out.setdefault(d.name, (d, now))
        return list(out.values())


def _digests_memo(rec: Record, memo: dict[tuple, list[Digest]]) -> list[Digest]:
    """Return :func:`digests_of` ``rec``, computed once per distinct content (keyed by ``repr`` of params: cheap)."""
    if isinstance(rec, Candidate):
        key = ("c", rec.cell, rec.model, rec.endpoint, repr(rec.params), rec.prompt_hash)
    elif isinstance(rec, Judgment):
        key = ("j", rec.judge_id, rec.judge_model, rec.judge_endpoint, repr(rec.judge_params), rec.mode,
               rec.rubric_key, rec.rubric_hash)
    else:
        return []
    if key not in memo:
        memo[key] = digests_of(rec)
    return memo[key]


_ROW_KEYS = {"candidate": (("model_id", "prompt_id", "prompt_version", "model", "endpoint", "prompt_hash"), "params"),
             "judgment": (("judge_id", "judge_model", "judge_endpoint", "mode", "rubric_id", "rubric_version",
                           "rubric_hash"), "judge_params")}


def made_rows(kind: str, rows: Any) -> Made:
    """Return :func:`set_aside_made`'s input for records read as dicts (``Rows``): digests computed once per distinct
    content (params keyed by ``repr``, as :func:`_digests_memo`), looked up per row in C loops."""
    fields, params = _ROW_KEYS[kind]
    keys = list(zip(*map(rows.column, fields), map(repr, rows.column(params))))
    groups: dict[tuple, int] = {}
    group = list(map(groups.setdefault, keys, range(len(keys))))  # each row's content: its first row's position
    memo = {n: _row_digests(kind, rows[n]) for n in groups.values()}
    of = rows.column("candidate_ids") if kind == "judgment" else [()] * len(rows)
    return Made(rows.column("id"), list(map(memo.__getitem__, group)), rows.column("created_at"), of)


def _row_digests(kind: str, row: dict[str, Any]) -> list[Digest]:
    if kind == "candidate":
        return [cell_digest(cell_key(row["model_id"], row["prompt_id"], row["prompt_version"]), row["model"],
                            row["endpoint"], row["params"], row["prompt_hash"])]
    return [judge_digest(row["judge_id"], row["judge_model"], row["judge_endpoint"], row["judge_params"], row["mode"]),
            rubric_digest(versioned(row["rubric_id"], row["rubric_version"]), row["rubric_hash"])]


def read_log(run_dir: Path) -> list[dict[str, Any]]:
    """Return the supersede log's entries in order (a torn last line, from a kill mid-write, is skipped)."""
    return [e for e in json_lines(Path(run_dir) / LOG) if isinstance(e, dict) and {"what", "key", "digest"} <= e.keys()]


def check_digests(run_dir: Path, planned: list[Digest], params: str, *, supersede: bool) -> list[tuple[Digest, str]]:
    """Return the (planned digest, current digest) pairs a sweep of ``params`` changes in ``run_dir``.
    Without ``supersede`` a change raises ParamsError naming each name, both digests and the ways out."""
    seen: dict[Name, str] = {}
    for d in planned:  # two rubric files of one id@version, with different texts
        if seen.setdefault(d.name, d.value) != d.value:
            raise ParamsError(f"{params}: {d.what} {d.key} has two contents in this params file ({seen[d.name]} and "
                              f"{d.value}); bump the version of one of them")
    store = RunStore(run_dir)
    records = (r for kind in (Candidate, Judgment) for r in store.iter(kind) if r.schema_version >= _ENDPOINTS_SINCE)
    digests = RunDigests.of(Path(run_dir), records)
    conflicts = digests.conflicts(planned)
    if conflicts and not supersede:
        raise ParamsError(_refusal(run_dir, params, digests, conflicts))
    return conflicts


def _refusal(run_dir: Path, params: str, digests: RunDigests, conflicts: list[tuple[Digest, str]]) -> str:
    lines = []
    for new, old in conflicts[:20]:
        held = digests.held.get(new.name, {}).get(old, Held())  # none: a supersede line chose it, unanswered
        changed = [_CHANGED[k] for k in new.parts if held.parts and held.parts.get(k) != new.parts[k]]
        lines.append(f"{params}: {new.what} {new.key} would mix two contents in {run_dir}: it has {held.records} "
                     f"record(s) of digest {old}, and {params} now gives digest {new.value}"
                     + (f" ({', '.join(changed)} changed)" if changed else ""))
    lines += [f"… and {len(conflicts) - 20} more"] if len(conflicts) > 20 else []
    ways = "; ".join(dict.fromkeys(_WAY_OUT[new.what] for new, _ in conflicts))
    return ("\n".join(lines) + f"\nA cell, a judge and a rubric version each stand for one content in a run folder. "
            f"Either {ways}, so the new content gets a new name; or pass --supersede (bench sweep; "
            f"supersede=True in bench.open_run) to set the earlier records aside from every analysis "
            f"(they stay in the run folder). Nothing was called.")


def supersede(run_dir: Path, conflicts: list[tuple[Digest, str]], params: str) -> None:
    """Append each change not already chosen to the supersede log (durably), printing one line per name."""
    chosen = {(e["what"], e["key"]): e["digest"] for e in read_log(Path(run_dir))}
    conflicts = [(new, old) for new, old in conflicts if chosen.get(new.name) != new.value]
    if not conflicts:
        return
    path = Path(run_dir) / LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    now = utc_now()
    data = "".join(json.dumps({"what": new.what, "key": new.key, "digest": new.value, "replaces": old,
                               "params": params, "created_at": now}) + "\n" for new, old in conflicts)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    for new, old in conflicts:
        print(f"superseded: {new.what} {new.key} now stands for digest {new.value}; its records of digest {old} are "
              f"set aside from every analysis (kept in {run_dir}; logged in {LOG})", flush=True)


@dataclass
class SetAside:
    """What an analysis leaves out: per name, the answers and judgments of digests other than its current one."""

    answers: dict[Name, int] = field(default_factory=dict)
    judgments: dict[Name, int] = field(default_factory=dict)
    mixed: list[Name] = field(default_factory=list)  # names mixed before the rule existed (no supersede line)

    @property
    def total(self) -> int:
        return sum(self.answers.values()) + sum(self.judgments.values())

    def note(self) -> str:
        """Return one line for the report ("" when nothing is set aside): how many, of which names, and why."""
        if not self.total:
            return ""
        names = list(dict.fromkeys([*self.answers, *self.judgments]))
        said = ", ".join(f"{what} {key}" + (" (mixed before bench refused it)" if (what, key) in self.mixed else "")
                         for what, key in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        return (f"{sum(self.answers.values())} answer(s) and {sum(self.judgments.values())} judgment(s) set aside: "
                f"records of an earlier content of {said}; each is analysed on its current content only "
                f"(the records stay in the run folder).")


def set_aside(run_dir: Path, candidates: list[Candidate], judgments: list[Judgment]
              ) -> tuple[list[Candidate], list[Judgment], SetAside]:
    """Return the candidates and judgments of each name's current digest, and what was set aside.
    A name mixed without a supersede line warns (MixedRunWarning) and is analysed on its latest digest."""
    memo: dict[tuple, list[Digest]] = {}
    kept_c, kept_j, aside = set_aside_made(
        run_dir, Made([c.id for c in candidates], [_digests_memo(c, memo) for c in candidates],
                      [c.created_at for c in candidates], [()] * len(candidates)),
        Made([j.id for j in judgments], [_digests_memo(j, memo) for j in judgments],
             [j.created_at for j in judgments], [j.candidate_ids for j in judgments]))
    return [candidates[i] for i in kept_c], [judgments[i] for i in kept_j], aside


class Made(NamedTuple):
    """Records as :func:`set_aside_made` reads them, a column each (records, or rows read as dicts)."""

    ids: Sequence[str]
    digests: Sequence[list[Digest]]  # the digests each was made under: one list per content, shared
    created_at: Sequence[str]
    of: Sequence[Any]  # the candidate ids each judgment grades (() for a candidate)


def set_aside_made(run_dir: Path, candidates: Made, judgments: Made) -> tuple[list[int], list[int], SetAside]:
    """Return the positions of the records :func:`set_aside` keeps, and what it sets aside (one digest each: fast)."""
    made = [*candidates.digests, *judgments.digests]
    values: dict[Name, set[str]] = {}
    for digests in dict(zip(map(id, made), made)).values():
        for d in digests:
            values.setdefault(d.name, set()).add(d.value)
    chosen = {(e["what"], e["key"]): e["digest"] for e in read_log(Path(run_dir))}
    if all(len(v) == 1 and chosen.get(n, next(iter(v))) in v for n, v in values.items()):
        return list(range(len(candidates.ids))), list(range(len(judgments.ids))), SetAside()
    digests = RunDigests.made(Path(run_dir), zip(made, [*candidates.created_at, *judgments.created_at]))
    aside = SetAside(mixed=[n for n, held in digests.held.items() if len(held) > 1 and n not in digests.chosen])
    current = {name: digests.current(name) for name in digests.held}
    stale_of: dict[int, list[Name]] = {}  # per digests list (shared by the records of one content)

    def stale(made: list[Digest]) -> list[Name]:
        if id(made) not in stale_of:
            stale_of[id(made)] = [d.name for d in made if current[d.name] != d.value]
        return stale_of[id(made)]
    dropped: dict[str, Name] = {}
    for cid, made_under in zip(candidates.ids, candidates.digests, strict=True):
        if names := stale(made_under):
            dropped.setdefault(cid, names[0])
    kept_j, dropped_j = [], {}
    for n, (jid, made_under, of) in enumerate(zip(judgments.ids, judgments.digests, judgments.of, strict=True)):
        names = stale(made_under) or [dropped[c] for c in of if c in dropped]
        if names:
            dropped_j.setdefault(jid, names[0])
        else:
            kept_j.append(n)
    for counts, ids in ((aside.answers, dropped), (aside.judgments, dropped_j)):
        for name in ids.values():
            counts[name] = counts.get(name, 0) + 1
    _warn_mixed(run_dir, digests, aside)
    return [n for n, cid in enumerate(candidates.ids) if cid not in dropped], kept_j, aside


def _warn_mixed(run_dir: Path, digests: RunDigests, aside: SetAside) -> None:
    for what, key in aside.mixed:
        held = digests.held[(what, key)]
        warnings.warn(f"{run_dir}: {what} {key} holds records of {len(held)} contents (" + ", ".join(
            f"digest {d}: {h.records} record(s)" for d, h in held.items()) + f"), written before bench refused "
            f"that; analysed on the latest ({digests.current((what, key))}) only", MixedRunWarning, stacklevel=5)


def set_aside_ids(run_dir: Path) -> set[str]:
    """Return the ids of a run folder's candidates and judgments that every analysis sets aside."""
    store = RunStore(run_dir)
    cands, judgs = store.read(Candidate), store.read(Judgment)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixedRunWarning)  # said by the analysis; this only filters
        kept_c, kept_j, _ = set_aside(Path(run_dir), cands, judgs)
    return ({r.id for r in cands} - {r.id for r in kept_c}) | ({r.id for r in judgs} - {r.id for r in kept_j})


def current_candidates(run_dir: Path, candidates: list[Candidate]) -> list[Candidate]:
    """Return the candidates of each cell's current digest: the answers judges grade (never one set aside)."""
    digests, memo = RunDigests.of(Path(run_dir), candidates), {}
    return [c for c in candidates if digests.current(("cell", c.cell)) == _digests_memo(c, memo)[0].value]
