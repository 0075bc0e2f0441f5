"""JudgeBench (Tan et al., 2024): score a pairwise judge exactly as it does, and write its format. Each verdict
adds +1 (agrees with the label), −1 (contradicts) or 0; a pair is correct when the sum is positive.
Accuracy counts failures in the denominator."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError, ParamsError
from bench.core.store import RunStore, atomic_write
from bench.core.records import Judgment, Scenario

__all__ = ["CATEGORIES", "PAIR_KEYS", "category_of", "export_judgebench", "export_run", "print_score", "normalize_label",
           "score_file", "score_judgments", "write_jsonl"]

CATEGORIES = ("knowledge", "reasoning", "math", "coding")
_CATEGORY_PREFIXES = (("mmlu-pro", "knowledge"), ("livebench-reasoning", "reasoning"),
                      ("livebench-math", "math"), ("livecodebench", "coding"))
PAIR_KEYS = ("pair_id", "original_id", "source", "question", "response_model", "response_A", "response_B",
             "label")  # a JudgeBench pair record, in the order of its files
_NORMAL = {"A>B": "A>B", "A>>B": "A>B", "B>A": "B>A", "B>>A": "B>A", "A=B": "A=B"}
_FLIP = {"A>B": "B>A", "B>A": "A>B", "A=B": "A=B"}


def normalize_label(label: Any) -> str | None:
    """Return ``A>B``, ``B>A``, ``A=B`` or None for a decision (``A>>B`` → ``A>B``); ValueError for anything else."""
    if label is None:
        return None
    if isinstance(label, str) and label.strip() in _NORMAL:
        return _NORMAL[label.strip()]
    raise ValueError(f"unknown decision {label!r} (expected A>B, B>A, A=B, A>>B, B>>A or null)")


def category_of(source: str) -> str | None:
    """Return the JudgeBench category of a pair's ``source`` (``mmlu-pro-law`` → knowledge), or None."""
    for prefix, category in _CATEGORY_PREFIXES:
        if source.startswith(prefix):
            return category
    return None


@dataclass
class _Pair:
    """One labelled pair's verdicts in the ORIGINAL order (one verdict, or two: as shown, then swapped)."""

    label: str  # A>B or B>A
    source: str
    verdicts: list[str | None]


@dataclass
class _Tally:
    correct: int = 0
    pairs: int = 0

    def accuracy(self) -> float | None:
        return round(100 * self.correct / self.pairs, 2) if self.pairs else None


@dataclass
class _Score:
    overall: _Tally = field(default_factory=_Tally)
    categories: dict[str, _Tally] = field(default_factory=lambda: {c: _Tally() for c in CATEGORIES})
    inconsistent: int = 0
    nulls: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"overall": self.overall.accuracy(),
                "categories": {c: t.accuracy() for c, t in self.categories.items()},
                "pairs": self.overall.pairs, "inconsistent": self.inconsistent, "nulls": self.nulls}


def _correct(pair: _Pair) -> bool:
    """Return JudgeBench's verdict on one pair: the sum of ±1 votes is positive (one vote: equals the label)."""
    if len(pair.verdicts) == 1:
        return pair.verdicts[0] == pair.label
    opposite = _FLIP[pair.label]
    total = sum(1 if v == pair.label else -1 if v == opposite else 0 for v in pair.verdicts)
    return total > 0


def _score(pairs: Iterable[_Pair]) -> _Score:
    out = _Score()
    for pair in pairs:
        ok = _correct(pair)
        category = category_of(pair.source)
        for tally in [out.overall] + ([out.categories[category]] if category is not None else []):
            tally.pairs += 1
            tally.correct += ok
        out.nulls += sum(v is None for v in pair.verdicts)
        out.inconsistent += len(pair.verdicts) == 2 and pair.verdicts[0] != pair.verdicts[1]
    return out


def _read_file(path: Path) -> list[_Pair]:
    """Return the pairs of a JudgeBench judge output file; BenchError naming ``file:line`` if malformed."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            lines = fh.readlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ParamsError(f"{path}: cannot read the JudgeBench file ({' '.join(reason.split())})") from None
    pairs: list[_Pair] = []
    seen: dict[Any, int] = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ParamsError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise ParamsError(f"{where}: expected one JSON object per line, got {type(row).__name__}")
        pairs.append(_pair_of_row(row, where))
        pair_id = row.get("pair_id")
        if pair_id is not None:
            if pair_id in seen:
                raise ParamsError(f"{where}: pair_id {pair_id!r} already on line {seen[pair_id]}; a JudgeBench "
                                  f"file has one line per pair")
            seen[pair_id] = lineno
    if not pairs:
        raise ParamsError(f"{path}: no pairs (the file is empty)")
    return pairs


def _pair_of_row(row: dict[str, Any], where: str) -> _Pair:
    """Return one pair of a JudgeBench output line, its second verdict mapped back to the original order."""
    label = row.get("label")
    if label not in ("A>B", "B>A"):
        raise ParamsError(f"{where}: 'label' must be \"A>B\" or \"B>A\" (got {label!r})")
    source = row.get("source")
    if not isinstance(source, str):
        raise ParamsError(f"{where}: 'source' must be a string such as \"mmlu-pro-law\" (got {source!r})")
    judgments = row.get("judgments")
    if not isinstance(judgments, list) or len(judgments) not in (1, 2):
        raise ParamsError(f"{where}: 'judgments' must be a list of one or two judgments (got {judgments!r:.80})")
    verdicts: list[str | None] = []
    for index, judgment in enumerate(judgments):
        if judgment is None:
            verdicts.append(None)
            continue
        if not isinstance(judgment, dict) or "decision" not in judgment:
            raise ParamsError(f"{where}: judgments[{index}] must be null or an object with a 'decision'")
        try:
            decision = normalize_label(judgment["decision"])
        except ValueError as exc:
            raise ParamsError(f"{where}: judgments[{index}]: {exc}") from None
        verdicts.append(_flip(decision) if index == 1 else decision)  # the second one saw B as A
    return _Pair(label=label, source=source, verdicts=verdicts)


def _flip(decision: str | None) -> str | None:
    return None if decision is None else _FLIP[decision]


def score_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Return JudgeBench's scores of a judge output file: ``{"overall", "categories", "pairs", "inconsistent",
    "nulls"}``, percentages to 2 decimals (None: no pairs); ParamsError naming ``file:line`` if malformed."""
    return _score(_read_file(Path(path))).as_dict()


def _label_of(scenario: Scenario) -> tuple[str, str]:
    """Return (label, source) of a JudgeBench scenario; BenchError if it is not one."""
    ref = scenario.reference or {}
    label, source = ref.get("label"), ref.get("source")
    if label not in ("A>B", "B>A") or not isinstance(source, str):
        raise BenchError(f"scenario {scenario.id} is not a JudgeBench pair: its reference needs label "
                         f"(A>B or B>A) and source (got label={label!r}, source={source!r}); load the pairs "
                         f"with params/judgebench.yaml")
    return label, source


def _by_scenario(judgments: Iterable[Judgment],
                 scenarios: dict[str, Scenario]) -> dict[str, dict[str, Judgment]]:
    """Return {scenario id: {order: last success, else failure}}; BenchError on mixed judges, non-pairwise, unknown."""
    grouped: dict[str, dict[str, Judgment]] = {}
    judges: set[tuple[str, str]] = set()
    for j in judgments:
        if j.mode != "pairwise" or j.order not in ("AB", "BA"):
            raise BenchError(f"judgment {j.id} is not a pairwise judgment (mode {j.mode}, order {j.order}); "
                             f"JudgeBench scores pairwise judges only")
        if j.scenario_id not in scenarios:
            raise BenchError(f"judgment {j.id} is about scenario {j.scenario_id}, which is not among the "
                             f"scenarios given; pass the run's scenarios")
        judges.add((j.judge_id, j.judge_model))
        slot = grouped.setdefault(j.scenario_id, {})
        prev = slot.get(j.order)
        if prev is None or j.ok or not prev.ok:
            slot[j.order] = j
    if len(judges) > 1:
        names = ", ".join(sorted(f"{i} ({m})" for i, m in judges))
        raise BenchError(f"the judgments come from {len(judges)} judges ({names}); score one judge at a time")
    return {sid: grouped[sid] for sid in scenarios if sid in grouped}


def _verdict(j: Judgment | None) -> str | None:
    """Return a judgment's verdict in the original order (None when it failed or has none)."""
    if j is None or not j.ok or j.verdict is None:
        return None
    try:
        return normalize_label(j.verdict)
    except ValueError as exc:
        raise BenchError(f"judgment {j.id}: {exc}") from None


def score_judgments(judgments: Iterable[Judgment], scenarios: dict[str, Scenario]) -> dict[str, Any]:
    """Return ``score_file``'s dict for our pairwise judgments of JudgeBench scenarios (a failure: a null verdict);
    a pair with a ``BA`` judgment is a two-order pair (a missing ``AB``: null), else a single-order one."""
    pairs = []
    for sid, orders in _by_scenario(judgments, scenarios).items():
        label, source = _label_of(scenarios[sid])
        verdicts = [_verdict(orders.get("AB"))]
        if "BA" in orders:
            verdicts.append(_verdict(orders["BA"]))  # Judgment.verdict is already in the original order
        pairs.append(_Pair(label=label, source=source, verdicts=verdicts))
    if not pairs:
        raise BenchError("no pairwise judgments to score")
    return _score(pairs).as_dict()


def _exported(j: Judgment | None) -> dict[str, Any] | None:
    """Return one JudgeBench judgment object (decision in the order SHOWN to the judge), or None if failed."""
    if j is None or not j.ok:
        return None
    verdict = _verdict(j)
    decision = _flip(verdict) if j.order == "BA" else verdict  # JudgeBench keeps the swapped call un-mapped
    return {"judgment": {"judge_model": j.judge_model, "prompt": j.prompt, "response": j.raw},
            "decision": decision}


def export_judgebench(judgments: list[Judgment], scenarios: dict[str, Scenario],
                      judge_name: str) -> list[dict[str, Any]]:
    """Return a JudgeBench record per judged scenario: the pair (``PAIR_KEYS``), ``judge_name`` and ``judgments``
    (``[AB, BA]`` or ``[AB]``, decisions as shown, null if failed): their ``score_file`` equals ``score_judgments``."""
    out = []
    for sid, orders in _by_scenario(judgments, scenarios).items():
        scenario = scenarios[sid]
        _label_of(scenario)
        values = {**(scenario.reference or {}), **scenario.fields}
        missing = [k for k in PAIR_KEYS if k not in values]
        if missing:
            raise BenchError(f"scenario {sid} lacks {', '.join(missing)} (needed in a JudgeBench record); load "
                             f"the pairs with params/judgebench.yaml")
        record = {k: values[k] for k in PAIR_KEYS}
        record["judge_name"] = judge_name
        record["judgments"] = [_exported(orders.get("AB"))]
        if "BA" in orders:
            record["judgments"].append(_exported(orders["BA"]))
        out.append(record)
    return out


def write_jsonl(records: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write one JSON object per line (UTF-8, as JudgeBench writes them) atomically; return the path."""
    path = Path(path)
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    atomic_write(path, data, shared=True)  # a result to pass on: the user's umask, not 0600
    return path


def _table(path: str, pairs: list[_Pair], score: _Score) -> str:
    def pct(t: _Tally) -> str:
        value = t.accuracy()
        return "—" if value is None else f"{value:6.2f}%"

    n = score.overall.pairs
    two = sum(len(p.verdicts) == 2 for p in pairs)
    verdicts = sum(len(p.verdicts) for p in pairs)
    rows = [f"JudgeBench accuracy of {path}", "", f"{'':<14}{'pairs':>6}  accuracy",
            f"{'overall':<14}{n:>6}  {pct(score.overall)}"]
    rows += [f"  {c:<12}{t.pairs:>6}  {pct(t)}" for c, t in score.categories.items()]
    other = n - sum(t.pairs for t in score.categories.values())
    if other:
        rows.append(f"  {'(other)':<12}{other:>6}  (counted in overall only)")
    rows += ["", f"inconsistent  {score.inconsistent} of {two} pairs judged in both orders",
             f"nulls         {score.nulls} of {verdicts} verdicts (failed or unparsed)"]
    return "\n".join(rows)


def print_score(file: str | Path, as_json: bool = False) -> int:
    """Print the JudgeBench score of a judge output file (a table, or one JSON object); return 0, or 2 on a bad file."""
    try:
        pairs = _read_file(Path(file))
    except BenchError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    score = _score(pairs)
    print(json.dumps(score.as_dict()) if as_json else _table(str(file), pairs, score))
    return 0


def export_run(run_dir: str | Path, file: str | Path, judge: str | None = None) -> tuple[int, str, Path]:
    """Write a run's pairwise judgments of one judge in JudgeBench's format; return (pairs, judge, path)."""
    store = RunStore(run_dir)
    judgments = [j for j in store.latest(Judgment).values() if j.mode == "pairwise"]
    judges = sorted({j.judge_id for j in judgments})
    judge = judge or (judges[0] if len(judges) == 1 else None)
    if judge not in judges:
        raise BenchError(f"{run_dir}: choose a pairwise judge with --judge; the run has {judges or 'none'}")
    scenarios = {s.id: s for s in store.read(Scenario)}
    records = export_judgebench([j for j in judgments if j.judge_id == judge], scenarios, judge)
    return len(records), judge, write_jsonl(records, file)
