"""Human review of a run's judgments: the items to review, filters, saving overrides, offline export/apply.

A review overrides one judgment (for pairwise: the verdict of the pair, stored on its A/B-order
judgment). It is a ``Review`` record appended to the run store: nothing is edited in place, a
later review of the same judgment by the same reviewer supersedes the earlier one, and the
history stays. Scores are checked against the scale of the exact rubric version the judgment
was graded with (its snapshot in the run folder). Applying an offline review file is idempotent:
an entry that says the same as its reviewer's latest review of that judgment (:func:`same_review`)
is not applied again. The "random" filter proposes the unreviewed items in a uniformly random
(seeded) order: the human-calibrated leaderboard is valid only for reviews drawn at random, not
for the disagreements or extremes a reviewer would pick first.
"""

from __future__ import annotations

import json
import os
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.config.rubrics import Rubric, run_rubric
from bench.core.errors import BenchError
from bench.core.flags import flags
from bench.core.paths import project_root
from bench.core.records import Candidate, Judgment, Review, Scenario, utc_now
from bench.core.secrets import redact
from bench.core.store import RunStore, atomic_write
from bench.tracking.reviews import log_reviews

FILTERS = {
    "random": "at random (keeps the calibrated leaderboard valid)",
    "disagreement": "judges disagree first",
    "unreviewed": "not yet reviewed",
    "failures": "parse failures",
    "extreme": "extreme scores",
    "flagged": "injection-like answers",
    "all": "every item",
}
EXPORT_FORMAT = "bench-review/1"


@dataclass
class ReviewItem:
    """One thing to review: a candidate (or an A/B pair) with every judge's judgments and the reviews so far."""

    key: tuple[str, ...]  # candidate ids
    scenario: Scenario | None
    texts: list[str]
    judgments: list[Judgment]
    reviews: list[Review] = field(default_factory=list)  # oldest first

    @property
    def pairwise(self) -> bool:
        return len(self.key) == 2

    def reviewable(self) -> list[Judgment]:
        """Return the judgments a review can override: successes and failures alike (one per pairwise pair)."""
        return [j for j in self.judgments if j.order in (None, "AB")]

    def latest_review(self, judgment_id: str) -> Review | None:
        found = [r for r in self.reviews if r.judgment_id == judgment_id]
        return found[-1] if found else None

    @property
    def reviewed(self) -> bool:
        return bool(self.reviews)

    @property
    def failed(self) -> bool:
        return any(j.error_kind == "parse" for j in self.judgments)

    def spread(self, rubrics: dict[str, Rubric]) -> float:
        """Return how much the judges disagree: the range of their normalized composites (0–1), or for
        pairwise the share of verdict pairs that differ (across judges and across the two orders)."""
        if self.pairwise:
            verdicts = [j.verdict for j in self.judgments if j.verdict]
            pairs = [(a, b) for i, a in enumerate(verdicts) for b in verdicts[i + 1:]]
            return sum(a != b for a, b in pairs) / len(pairs) if pairs else 0.0
        units = [_unit(j, rubrics) for j in self.judgments if j.score is not None]
        units = [u for u in units if u is not None]
        return max(units) - min(units) if len(units) > 1 else 0.0

    def extreme(self, rubrics: dict[str, Rubric]) -> bool:
        return any(u in (0.0, 1.0) for u in (_unit(j, rubrics) for j in self.judgments if j.score is not None))


def _unit(j: Judgment, rubrics: dict[str, Rubric]) -> float | None:
    r = rubrics.get(j.rubric_hash)
    if r is None or not r.criteria or j.score is None:
        return None
    lo, hi = r.composite_scale if j.mode != "hybrid" else (0, 1)
    return (j.score - lo) / (hi - lo) if hi > lo else None


def same_review(a: Review, b: Review) -> bool:
    """Return whether two reviews say the same thing: same judgment, reviewer, scores (as numbers) or
    verdict, and note. Re-applying a review file skips an entry that is the same as the latest review of
    its judgment by that reviewer; the time of the review does not count."""
    def scores(r: Review) -> dict[str, float] | None:
        return {k: float(v) for k, v in r.scores.items()} if r.scores else None

    return (a.judgment_id, a.reviewer, a.verdict, a.note or "", scores(a)) == \
        (b.judgment_id, b.reviewer, b.verdict, b.note or "", scores(b))


@dataclass
class Applied:
    """What applying a review file did: the reviews appended, and the filled-in entries already applied."""

    path: str
    new: list[Review]
    unchanged: int  # entries the same as their reviewer's latest review of that judgment: skipped

    @property
    def message(self) -> str:
        if not self.new:
            return (f"0 new reviews: every entry of {self.path} is already applied" if self.unchanged else
                    f"0 new reviews: no entry of {self.path} is filled in")
        entries = "entry" if self.unchanged == 1 else "entries"
        also = f"; {self.unchanged} {entries} already applied" if self.unchanged else ""
        return f"applied {len(self.new)} review(s) from {self.path}{also}"


class ReviewSession:
    """A reviewer's view of one run folder: items, filters, and saving reviews."""

    def __init__(self, run_dir: str | Path, reviewer: str | None = None):
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise BenchError(f"{self.run_dir}: no such run folder; run `bench sweep params/<grid>.yaml` first")
        self.reviewer = (reviewer or os.environ.get("BENCH_REVIEWER") or os.environ.get("USER") or "").strip()
        self.store = RunStore(self.run_dir)
        self.reload()

    def reload(self) -> None:
        """Read the run's records again (a sweep may still be adding judgments)."""
        cands = self.store.latest(Candidate)
        judgments = list(self.store.latest(Judgment).values())
        self.judgments = {j.id: j for j in judgments}
        scenarios = {s.id: s for s in self.store.read(Scenario)}
        self.rubrics = self._rubrics(judgments)
        groups: dict[tuple[str, ...], list[Judgment]] = defaultdict(list)
        for j in judgments:
            groups[tuple(j.candidate_ids)].append(j)
        reviews: dict[str, list[Review]] = defaultdict(list)
        for r in sorted(self.store.read(Review), key=lambda r: r.created_at):
            reviews[r.judgment_id].append(r)
        self.items = []
        for key, js in groups.items():
            js.sort(key=lambda j: (j.judge_id, j.order or ""))
            texts = [_text(cid, cands, scenarios.get(js[0].scenario_id)) for cid in key]
            item = ReviewItem(key, scenarios.get(js[0].scenario_id), texts, js,
                              sorted((r for j in js for r in reviews.get(j.id, [])), key=lambda r: r.created_at))
            self.items.append(item)
        self.items.sort(key=lambda it: (it.judgments[0].scenario_id, it.key))

    def _rubrics(self, judgments: list[Judgment]) -> dict[str, Rubric]:
        out: dict[str, Rubric] = {}
        for j in judgments:
            if j.rubric_hash not in out:
                out[j.rubric_hash] = run_rubric(self.run_dir, j.rubric_id, j.rubric_hash, project_root())
        return out

    def select(self, name: str = "random") -> list[ReviewItem]:
        """Return the items of a filter: see :data:`FILTERS`. The default proposes the unreviewed items at
        random, the only order whose reviews calibrate the leaderboard without bias."""
        if name not in FILTERS:
            raise BenchError(f"unknown review filter {name!r}; filters are: {', '.join(FILTERS)}")
        items = self.items
        if name == "disagreement":
            return sorted(items, key=lambda it: (-it.spread(self.rubrics), it.reviewed))
        if name == "unreviewed":
            return [it for it in items if not it.reviewed]
        if name == "random":  # PPI needs reviews drawn at random: bench.analysis.calibrated
            order = list(items)  # every item shuffled, then the reviewed left out: a review keeps the order
            random.Random(f"bench-review:{self.run_dir.name}").shuffle(order)
            return [it for it in order if not it.reviewed]
        if name == "failures":
            return [it for it in items if it.failed]
        if name == "extreme":
            return [it for it in items if it.extreme(self.rubrics)]
        if name == "flagged":  # text that looks like a verdict or an instruction to the judge (bench.core.flags)
            return [it for it in items if any(flags(text) for text in it.texts)]
        return list(items)

    def progress(self) -> tuple[int, int]:
        """Return (items with at least one review, items)."""
        return sum(it.reviewed for it in self.items), len(self.items)

    def rubric(self, judgment: Judgment) -> Rubric:
        return self.rubrics[judgment.rubric_hash]

    def build_review(self, judgment_id: str, *, scores: dict[str, float] | None = None, verdict: str | None = None,
                     note: str = "", reviewer: str | None = None) -> Review:
        """Return a validated Review of ``judgment_id`` (raise BenchError listing every problem)."""
        problems, review = self._check(judgment_id, scores, verdict, reviewer or self.reviewer, note)
        if problems:
            raise BenchError("; ".join(problems))
        return review

    def save(self, judgment_id: str, **kw: Any) -> Review:
        """Validate and append a Review (and log it to MLflow when tracking is on); return it."""
        review = self.build_review(judgment_id, **kw)
        self.store.append([review])
        log_reviews(self.run_dir, [review])
        self.reload()
        return review

    def _check(self, judgment_id: str, scores: dict[str, float] | None, verdict: str | None, reviewer: str,
               note: str) -> tuple[list[str], Review | None]:
        j = self.judgments.get(judgment_id)
        if j is None:
            return [f"unknown judgment id {judgment_id!r} (not in {self.run_dir})"], None
        problems = [] if reviewer else ["no reviewer: set the reviewer's name"]
        rubric = self.rubric(j)
        score = None
        if j.mode == "pairwise":
            if verdict not in rubric.labels:
                problems.append(f"{judgment_id}: verdict {verdict!r} is not one of {', '.join(rubric.labels)}")
            if scores:
                problems.append(f"{judgment_id}: a pairwise judgment takes a verdict, not scores")
        else:
            problems += _score_problems(judgment_id, rubric, scores or {})
            if not problems and rubric.criteria:
                score = rubric.composite(scores)
        if problems:
            return problems, None
        return [], Review(judgment_id=j.id, candidate_ids=list(j.candidate_ids), reviewer=reviewer,
                          rubric_id=j.rubric_id, rubric_version=j.rubric_version, scores=scores or None,
                          score=score, verdict=verdict if j.mode == "pairwise" else None, note=note)

    # -- offline review --------------------------------------------------------------------------------
    def export(self, path: str | Path, filter: str = "all") -> int:
        """Write the items of ``filter`` as a JSON file a reviewer fills in; return the entry count."""
        entries = []
        for it in self.select(filter):
            for j in it.reviewable():
                entries.append(_entry(it, j, self.rubric(j), it.latest_review(j.id)))
        doc = {"format": EXPORT_FORMAT, "run": self.run_dir.name, "exported_at": utc_now(), "reviewer": "",
               "how": "Fill in review.scores (every criterion, within its scale) or review.verdict for pairwise, "
                      "and reviewer; leave review null to skip an entry. Then: bench review apply RUN FILE.",
               "entries": entries}
        # built from records (redacted as written); redacted again, since the file travels to reviewers
        atomic_write(Path(path), redact(json.dumps(doc, ensure_ascii=False, indent=1)).encode("utf-8"))
        return len(entries)

    def apply(self, path: str | Path) -> list[Review]:
        """Validate every filled-in entry of an exported file; append the new ones, or none (raise listing every
        problem); return the reviews appended (:meth:`apply_file` also says how many were already applied)."""
        return self.apply_file(path).new

    def apply_file(self, path: str | Path) -> Applied:
        """Validate every filled-in entry of an exported file and append the entries not already applied
        (all or nothing: raise listing every problem). Applying the same file twice changes nothing.

        An entry is already applied when the latest review of its judgment by the same reviewer has the
        same scores (or verdict) and note; a changed entry is a new review, which supersedes the earlier one.
        """
        path = Path(path)
        doc = _read_review_file(path)
        if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT or not isinstance(doc.get("entries"), list):
            raise BenchError(f"{path}: not a bench review file (expected format {EXPORT_FORMAT!r} with entries)")
        problems, reviews, unchanged = [], [], 0
        latest = self._latest_reviews()
        for n, e in enumerate(doc["entries"]):
            if not isinstance(e, dict) or e.get("review") is None:
                continue
            where = f"entries[{n}]"
            probs, review = self._check_entry(e, str(doc.get("reviewer") or "").strip(), where)
            problems += probs
            if review is None:
                continue
            key = (review.judgment_id, review.reviewer)
            if key in latest and same_review(latest[key], review):
                unchanged += 1
                continue
            latest[key] = review
            reviews.append(review)
        if problems:
            raise BenchError(f"{path}: nothing applied; {len(problems)} problem(s):\n  " + "\n  ".join(problems))
        if reviews:
            self.store.append(reviews)
            log_reviews(self.run_dir, reviews)
            self.reload()
        return Applied(str(path), reviews, unchanged)

    def _latest_reviews(self) -> dict[tuple[str, str], Review]:
        """Return the latest review of each (judgment, reviewer) in the store."""
        latest: dict[tuple[str, str], Review] = {}
        for r in sorted(self.store.read(Review), key=lambda r: r.created_at):
            latest[(r.judgment_id, r.reviewer)] = r
        return latest

    def _check_entry(self, e: dict, reviewer: str, where: str) -> tuple[list[str], Review | None]:
        jid, r = e.get("judgment_id"), e["review"]
        if not isinstance(r, dict):
            return [f"{where}: review must be an object with scores or verdict and note"], None
        too_long = [f"{where}.review.{k}: {len(str(r.get(k) or '')):,} characters, more than {MAX_TEXT:,}"
                    for k in ("note", "reviewer", "verdict") if len(str(r.get(k) or "")) > MAX_TEXT]
        if too_long:
            return too_long, None
        j = self.judgments.get(str(jid))
        if j is not None and e.get("rubric") != j.rubric_key:
            return [f"{where} ({jid}): rubric {e.get('rubric')!r} is not the judgment's "
                    f"{j.rubric_key}; export again"], None
        scores = r.get("scores")
        if scores is not None and not (isinstance(scores, dict) and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in scores.values())):
            return [f"{where} ({jid}): scores must map criteria to numbers"], None
        probs, review = self._check(str(jid), scores, r.get("verdict"), str(r.get("reviewer") or reviewer).strip(),
                                    str(r.get("note") or ""))
        return [f"{where}: {p}" for p in probs], review


MAX_FILE_BYTES = 64 * 2**20  # a review file of every judgment of a big run is a few MB
MAX_DEPTH = 32  # an exported file nests 5 deep
MAX_TEXT = 20_000  # characters of a note (a page of text) or a reviewer's name


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


def _score_problems(jid: str, rubric: Rubric, scores: dict[str, float]) -> list[str]:
    out = []
    ids = [c.id for c in rubric.criteria]
    for c in rubric.criteria:
        if c.id not in scores:
            out.append(f"{jid}: missing a score for {c.id} ({c.scale[0]}–{c.scale[1]})")
        elif float(scores[c.id]) not in c.levels:
            out.append(f"{jid}: {c.id} = {scores[c.id]} is outside the scale {c.scale[0]}–{c.scale[1]} "
                       f"of {rubric.key}")
    out += [f"{jid}: unknown criterion {k!r} (rubric {rubric.key} has {', '.join(ids)})" for k in scores if k not in ids]
    return out


def _text(cid: str, cands: dict[str, Candidate], scenario: Scenario | None) -> str:
    c = cands.get(cid)
    if c is not None:
        return c.output if c.output is not None else f"[no answer: {c.error}]"
    side = cid.rsplit(":", 1)[-1]  # a dataset pair: "<scenario id>:A"
    return str((scenario.fields if scenario else {}).get(f"response_{side}", ""))


def _entry(it: ReviewItem, j: Judgment, rubric: Rubric, latest: Review | None) -> dict[str, Any]:
    scale = {c.id: list(c.scale) for c in rubric.criteria}
    return {"judgment_id": j.id, "judge": j.judge_id, "rubric": j.rubric_key,
            "mode": j.mode, "scale": scale or None, "labels": list(rubric.labels) if j.mode == "pairwise" else None,
            "scenario": it.scenario.fields if it.scenario else None, "answers": it.texts,
            "judge_scores": j.scores, "judge_verdict": j.verdict, "judge_rationale": j.rationale,
            "judge_error": j.error,
            "latest_review": latest.model_dump(include={"reviewer", "scores", "verdict", "note", "created_at"})
            if latest else None,
            "review": None}
