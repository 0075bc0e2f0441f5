"""Human review of a run's judgments: items, filters, saving. Reviews are appended (a later one supersedes),
checked against the item's rubric snapshot; the "random" filter is seeded, as calibration requires."""

from __future__ import annotations

import os
import random
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.config.rubrics import Rubric, run_rubric
from bench.core.digests import MixedRunWarning, set_aside
from bench.core.errors import BenchError
from bench.core.flags import flags
from bench.core.paths import project_root
from bench.core.records import Candidate, Judgment, Review, Scenario
from bench.core.reviewed import Reviewed, Unit, judgment_unit, review_unit, reviewed, scale_of
from bench.core.store import RunStore
from bench.review.offline import Applied, apply_file, export_file
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


@dataclass
class ReviewItem:
    """One thing to review: an answer (or A/B pair) on one rubric version, its judgments and reviews so far."""

    key: tuple[str, ...]  # candidate ids
    rubric: str  # the rubric id@version every judgment of the item was graded on
    scenario: Scenario | None
    texts: list[str]
    judgments: list[Judgment]
    reviews: list[Review] = field(default_factory=list)  # usable reviews of the item, oldest first
    answers: list[Candidate | None] = field(default_factory=list)  # each text's record (None: a dataset's)
    reference: dict[str, Any] = field(default_factory=dict)  # the reference values the rubric showed its judges
    judge_images: bool = False  # the rubric showed its judges the scenario's images
    judge_reasoning: bool = False  # the rubric showed its judges the answer's thinking (``show_reasoning``)

    @property
    def unit(self) -> Unit:
        return self.key, self.rubric

    @property
    def pairwise(self) -> bool:
        return len(self.key) == 2

    def reviewable(self) -> list[Judgment]:
        """Return the judgments a review can be saved on (AB or unordered): successes first, by judge, repeat."""
        found = [j for j in self.judgments if j.order in (None, "AB")]
        return sorted(found, key=lambda j: (not j.ok, j.judge_id, j.repeat))

    @property
    def anchor(self) -> Judgment:
        """Return the judgment a new review of the item is saved on."""
        return self.reviewable()[0]

    def latest_review(self, reviewer: str | None = None) -> Review | None:
        """Return the latest review of the item (by ``reviewer`` when given)."""
        found = [r for r in self.reviews if reviewer is None or r.reviewer == reviewer]
        return found[-1] if found else None

    @property
    def reviewed(self) -> bool:
        return bool(self.reviews)

    @property
    def failed(self) -> bool:
        return any(j.error_kind == "parse" for j in self.judgments)

    def spread(self, rubrics: dict[str, Rubric]) -> float:
        """Return how much the judges disagree: the range of normalized composites, or share of differing verdicts."""
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
        with warnings.catch_warnings():  # a mixed folder is the analysis's to warn about; here it only filters
            warnings.simplefilter("ignore", MixedRunWarning)  # an earlier content of a name is never proposed
            every_judgment = self.store.latest(Judgment)
            _, judgments, _ = set_aside(self.run_dir, list(cands.values()), list(every_judgment.values()))
        self.judgments = {j.id: j for j in judgments}
        scenarios = {s.id: s for s in self.store.read(Scenario)}
        self.rubrics = self._rubrics(judgments)
        every = self.store.read(Review)
        self.reviewed: Reviewed = reviewed(self.judgments, every, {h: scale_of(r) for h, r in self.rubrics.items()},
                                           every_judgment)
        history: dict[Unit, list[Review]] = defaultdict(list)
        for r in sorted(every, key=lambda r: r.created_at):
            unit = review_unit(r, self.judgments)
            if unit is not None and r.id not in self.reviewed.damaged:
                history[unit].append(r)
        groups: dict[Unit, list[Judgment]] = defaultdict(list)
        for j in judgments:
            if j.mode != "automated":  # checks only: no judge's grade for a human to check
                groups[judgment_unit(j)].append(j)
        self.items = []
        for (key, rubric), js in groups.items():
            if not any(j.order in (None, "AB") for j in js):
                continue  # a BA order without its AB judgment: nothing to save a review on
            js.sort(key=lambda j: (j.judge_id, j.repeat, j.order or ""))
            scenario, shown = scenarios.get(js[0].scenario_id), self.rubrics[js[0].rubric_hash]
            ref = {k: (scenario.reference or {})[k] for k in shown.reference if k in (scenario.reference or {})} \
                if scenario else {}
            self.items.append(ReviewItem(key, rubric, scenario, [_text(cid, cands, scenario) for cid in key], js,
                                         history.get((key, rubric), []), [cands.get(cid) for cid in key], ref,
                                         shown.images, shown.show_reasoning))
        self.items.sort(key=lambda it: (it.judgments[0].scenario_id, it.key, it.rubric))
        self._by_unit = {it.unit: it for it in self.items}

    def _rubrics(self, judgments: list[Judgment]) -> dict[str, Rubric]:
        out: dict[str, Rubric] = {}
        for j in judgments:
            if j.rubric_hash not in out:
                out[j.rubric_hash] = run_rubric(self.run_dir, j.rubric_id, j.rubric_hash, project_root())
        return out

    def item_of(self, judgment_id: str) -> ReviewItem | None:
        """Return the item a judgment belongs to (None for an unknown id)."""
        j = self.judgments.get(judgment_id)
        return self._by_unit.get(judgment_unit(j)) if j is not None else None

    @property
    def judge_ids(self) -> list[str]:
        """Return the ids of the judges whose grades are in the review queue."""
        return sorted({j.judge_id for it in self.items for j in it.judgments})

    @property
    def rubric_keys(self) -> list[str]:
        """Return the rubric versions (``id@version``) of the review queue's items."""
        return sorted({it.rubric for it in self.items})

    def select(self, name: str = "random", *, judge: str | None = None, rubric: str | None = None
               ) -> list[ReviewItem]:
        """Return the items of filter ``name`` (:data:`FILTERS`; random calibrates), of ``judge``, ``rubric``."""
        if name not in FILTERS:
            raise BenchError(f"unknown review filter {name!r}; filters are: {', '.join(FILTERS)}")
        for given, known, what in ((judge, self.judge_ids, "judge"), (rubric, self.rubric_keys, "rubric")):
            if given and given not in known and not any(k.split("@")[0] == given for k in known):
                raise BenchError(f"no item to review is graded by {what} {given!r} in {self.run_dir}; "
                                 f"{what}s with items: {', '.join(known) or 'none'}")
        items = [it for it in self.items if (not judge or any(j.judge_id == judge for j in it.judgments))
                 and (not rubric or rubric in (it.rubric, it.rubric.split("@")[0]))]
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
        """Return (items reviewed, items): ``bench.core.reviewed``'s one count, as the report says it."""
        return len(self.reviewed.reviewed), self.reviewed.units

    def rubric(self, judgment: Judgment) -> Rubric:
        return self.rubrics[judgment.rubric_hash]

    def build_review(self, judgment_id: str, *, scores: dict[str, float] | None = None, verdict: str | None = None,
                     note: str = "", reviewer: str | None = None, blind: bool = False) -> Review:
        """Return a validated Review of ``judgment_id``'s item, on its anchor (BenchError listing every problem)."""
        problems, review = self.check(judgment_id, scores, verdict, reviewer or self.reviewer, note, blind)
        if problems:
            raise BenchError("; ".join(problems))
        return review

    def save(self, judgment_id: str, **kw: Any) -> Review:
        """Validate and append a Review (logged to MLflow when tracking is on); return it. Keywords as build_review."""
        review = self.build_review(judgment_id, **kw)
        self.store.append([review])
        log_reviews(self.run_dir, [review])
        self.reload()
        return review

    def check(self, judgment_id: str, scores: dict[str, float] | None, verdict: str | None, reviewer: str,
              note: str, blind: bool) -> tuple[list[str], Review | None]:
        """Return (every problem, the Review when there is none) of a review of ``judgment_id``'s item."""
        j = self.judgments.get(judgment_id)
        if j is None:
            return [f"unknown judgment id {judgment_id!r} (not in {self.run_dir})"], None
        if j.mode == "automated":
            return [f"{judgment_id}: judge {j.judge_id} grades with checks only (rubric {j.rubric_key}, mode "
                    f"automated): there is no judge's grade to review"], None
        item = self.item_of(judgment_id)
        anchor = item.anchor if item is not None else j
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
        return [], Review(judgment_id=anchor.id, candidate_ids=list(j.candidate_ids), reviewer=reviewer,
                          rubric_id=j.rubric_id, rubric_version=j.rubric_version, scores=scores or None,
                          score=score, verdict=verdict if j.mode == "pairwise" else None, note=note, blind=blind)

    def export(self, path: str | Path, filter: str = "all", *, show_judges: bool = False, judge: str | None = None,
               rubric: str | None = None) -> int:
        """Write ``filter``'s items as a review file, blind unless ``show_judges``; return the entry count."""
        return export_file(self, Path(path), self.select(filter, judge=judge, rubric=rubric), show_judges=show_judges)

    def apply(self, path: str | Path) -> list[Review]:
        """Validate and append a review file's new entries (all or none); return the reviews appended."""
        return self.apply_file(path).new

    def apply_file(self, path: str | Path) -> Applied:
        """Validate a review file and append its entries not yet applied (all or nothing; raise listing problems)."""
        applied = apply_file(self, Path(path))
        if applied.new:
            self.store.append(applied.new)
            log_reviews(self.run_dir, applied.new)
            self.reload()
        return applied


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
