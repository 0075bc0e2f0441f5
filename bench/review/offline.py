"""Offline review files (`bench review export|apply`): one entry per item, blind unless asked otherwise; applying
is all or nothing and idempotent (conflicts refused, an entry equal to its reviewer's latest review skipped)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.records import Review, utc_now
from bench.core.reviewed import review_unit
from bench.core.secrets import redact
from bench.core.store import atomic_write

EXPORT_FORMAT = "bench-review/2"  # one entry per item, "blind" at the top
FORMATS = (EXPORT_FORMAT, "bench-review/1")  # 1: one entry per judgment, judges shown (applied as not blind)
MAX_FILE_BYTES = 64 * 2**20  # a review file of every judgment of a big run is a few MB
MAX_DEPTH = 32  # an exported file nests 5 deep
MAX_TEXT = 20_000  # characters of a note (a page of text) or a reviewer's name
HOW = ("Fill in review.scores (every criterion, within its scale) or review.verdict for pairwise, and reviewer; "
       "leave review null to skip an entry. Then: bench review apply RUN FILE. ")
BLIND = "This file is blind (no judge's grade is in it): the reviews applied from it calibrate the leaderboard."
SHOWN = ("This file shows the judges' grades (--show-judges): the reviews applied from it are recorded as not "
         "blind and do not calibrate the leaderboard.")


def same_review(a: Review, b: Review) -> bool:
    """Return whether two reviews say the same (judgment, reviewer, scores or verdict, note; not time or blind)."""
    def scores(r: Review) -> dict[str, float] | None:
        return {k: float(v) for k, v in r.scores.items()} if r.scores else None

    return (a.judgment_id, a.reviewer, a.verdict, a.note or "", scores(a)) == \
        (b.judgment_id, b.reviewer, b.verdict, b.note or "", scores(b))


def _says_the_same(a: Review, b: Review) -> bool:
    """Return :func:`same_review` for two reviews of one item, whichever of its judgments each is saved on."""
    return same_review(a.model_copy(update={"judgment_id": b.judgment_id}), b)


@dataclass
class Applied:
    """What applying a review file does: the reviews to append, and the filled-in entries already applied."""

    path: str
    new: list[Review]
    unchanged: int  # entries the same as their reviewer's latest review of that item: skipped

    @property
    def message(self) -> str:
        if not self.new:
            return (f"0 new reviews: every entry of {self.path} is already applied" if self.unchanged else
                    f"0 new reviews: no entry of {self.path} is filled in")
        entries = "entry" if self.unchanged == 1 else "entries"
        also = f"; {self.unchanged} {entries} already applied" if self.unchanged else ""
        blind = "blind" if all(r.blind for r in self.new) else "not blind"
        return f"applied {len(self.new)} review(s) from {self.path} ({blind}){also}"


def export_file(session: Any, path: Path, items: list[Any], *, show_judges: bool = False) -> int:
    """Write ``items`` (of a ``ReviewSession``) as a review file, one entry each; return the entry count."""
    entries = [_entry(session, it, show_judges) for it in items]
    doc = {"format": EXPORT_FORMAT, "run": session.run_dir.name, "exported_at": utc_now(),
           "blind": not show_judges, "reviewer": "", "how": HOW + (SHOWN if show_judges else BLIND),
           "entries": entries}
    # built from records (redacted as written); redacted again, since the file travels to reviewers
    atomic_write(path, redact(json.dumps(doc, ensure_ascii=False, indent=1)).encode("utf-8"), shared=True)  # umask
    return len(entries)


def _entry(session: Any, it: Any, show_judges: bool) -> dict[str, Any]:
    j = it.anchor
    rubric = session.rubric(j)
    latest = it.latest_review() if show_judges else it.latest_review(session.reviewer)  # blind: only your own
    entry = {"judgment_id": j.id, "answer": list(it.key), "rubric": it.rubric, "mode": j.mode,
             "scale": {c.id: list(c.scale) for c in rubric.criteria} or None,
             "labels": list(rubric.labels) if j.mode == "pairwise" else None,
             "scenario": it.scenario.fields if it.scenario else None, "answers": it.texts,
             **_conversations(it), **_judge_saw(it),
             "latest_review": latest.model_dump(include={"reviewer", "scores", "verdict", "note", "created_at",
                                                         "blind"}) if latest else None}
    if show_judges:
        entry["judges"] = [{"judge": g.judge_id, "judgment_id": g.id, "repeat": g.repeat, "order": g.order,
                            "scores": g.scores, "score": g.score, "verdict": g.verdict, "rationale": g.rationale,
                            "error": g.error} for g in it.judgments]
    entry["review"] = None
    return entry


def _conversations(it: Any) -> dict[str, Any]:
    """Return an item's transcripts and how each ended, as ``answers`` lists its texts ({} without any)."""
    records = [c if c is not None and c.transcript else None for c in getattr(it, "answers", None) or ()]
    if not any(records):
        return {}
    return {"transcripts": [c.transcript if c else None for c in records], "ended": [c.ended if c else None
                                                                                    for c in records]}


def _judge_saw(it: Any) -> dict[str, Any]:
    """Return the references and images the item's judges were shown (and whether); nothing the item lacks."""
    images = [{k: ref[k] for k in ("column", "file", "url") if ref.get(k)} for ref in
              (it.scenario.images if it.scenario and it.scenario.images else ())]
    thinking = [getattr(c, "reasoning", None) for c in getattr(it, "answers", None) or ()]
    return {**({"reference": it.reference} if it.reference else {}),
            **({"images": images, "images_shown_to_judge": it.judge_images} if images else {}),
            **({"thinking": thinking, "thinking_shown_to_judge": it.judge_reasoning} if any(thinking) else {})}


def apply_file(session: Any, path: Path) -> Applied:
    """Return the reviews a review file adds (not stored yet); BenchError listing every problem."""
    doc = _read_review_file(path)
    if not isinstance(doc, dict) or doc.get("format") not in FORMATS or not isinstance(doc.get("entries"), list):
        raise BenchError(f"{path}: not a bench review file (expected format {EXPORT_FORMAT!r} with entries)")
    entries = doc["entries"]
    shown = any(isinstance(e, dict) and ("judges" in e or "judge_scores" in e) for e in entries)
    blind = doc.get("format") == EXPORT_FORMAT and doc.get("blind") is True and not shown
    reviewer = str(doc.get("reviewer") or "").strip()
    problems: list[str] = []
    reviews: list[Review] = []
    unchanged = 0
    chosen: dict[Any, tuple[int, Review]] = {}
    for n, e in enumerate(entries):
        if not isinstance(e, dict) or e.get("review") is None:
            continue
        probs, review = _check_entry(session, e, reviewer, f"entries[{n}]", blind)
        problems += probs
        if review is None:
            continue
        key = (review_unit(review, session.judgments), review.reviewer)
        if key in chosen:
            m, first = chosen[key]
            if not _says_the_same(first, review):
                problems.append(_conflict(m, first, n, review, entries))
            continue  # an identical duplicate counts once
        chosen[key] = (n, review)
        latest = session.reviewed.latest.get(key)
        if latest is not None and _says_the_same(latest, review):
            unchanged += 1
            continue
        reviews.append(review)
    if problems:
        raise BenchError(f"{path}: nothing applied; {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    return Applied(str(path), reviews, unchanged)


def _said(r: Review) -> str:
    said = r.verdict or ", ".join(f"{k} {v:g}" for k, v in (r.scores or {}).items())
    return said + (f", note {r.note!r}" if r.note else "")


def _conflict(m: int, first: Review, n: int, second: Review, entries: list[Any]) -> str:
    """Return the problem of two entries reviewing one item differently, naming both."""
    jm, jn = entries[m].get("judgment_id"), entries[n].get("judgment_id")
    return (f"entries[{m}] (judgment {jm}) and entries[{n}] (judgment {jn}) both review answer "
            f"{' vs '.join(first.candidate_ids)} on {first.rubric_id}@{first.rubric_version} by "
            f"{first.reviewer!r} and disagree ({_said(first)} / {_said(second)}): one review covers every judge "
            f"and repeat of an answer on a rubric version; keep one of the two entries")


def _check_entry(session: Any, e: dict, reviewer: str, where: str, blind: bool) -> tuple[list[str], Review | None]:
    jid, r = e.get("judgment_id"), e["review"]
    if not isinstance(r, dict):
        return [f"{where}: review must be an object with scores or verdict and note"], None
    too_long = [f"{where}.review.{k}: {len(str(r.get(k) or '')):,} characters, more than {MAX_TEXT:,}"
                for k in ("note", "reviewer", "verdict") if len(str(r.get(k) or "")) > MAX_TEXT]
    if too_long:
        return too_long, None
    j = session.judgments.get(str(jid))
    if j is not None and e.get("rubric") != j.rubric_key:
        return [f"{where} ({jid}): rubric {e.get('rubric')!r} is not the judgment's "
                f"{j.rubric_key}; export again"], None
    scores = r.get("scores")
    if scores is not None and not (isinstance(scores, dict) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in scores.values())):
        return [f"{where} ({jid}): scores must map criteria to numbers"], None
    probs, review = session.check(str(jid), scores, r.get("verdict"), str(r.get("reviewer") or reviewer).strip(),
                                  str(r.get("note") or ""), blind)
    return [f"{where}: {p}" for p in probs], review


def _read_review_file(path: Path) -> Any:
    """Return the parsed review file; BenchError naming the file if it is unreadable, too big or too deep."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise BenchError(f"{path}: {size:,} bytes, more than a review file can be ({MAX_FILE_BYTES:,}); "
                             f"nothing applied")
        doc = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise BenchError(f"{path}: nested too deeply to be a review file; nothing applied") from None
    except (OSError, ValueError) as err:
        raise BenchError(f"{path}: not a readable review file ({err}); nothing applied") from None
    if _depth(doc) > MAX_DEPTH:
        raise BenchError(f"{path}: nested deeper than {MAX_DEPTH} levels, not a review file; nothing applied")
    return doc


def _depth(value: Any) -> int:
    """Return how deeply ``value`` nests (iteratively: a hostile file must not exhaust the stack)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        todo.extend((c, level + 1) for c in children)
    return deepest
