"""What earlier records of a run folder say about the next requests: reply lengths and repair turns.
Repair rates count retries as repairs, so they err high, never low."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.config.params import Cell
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.estimate.bounds import SIMULATED
from bench.judge.grader import Judge


@dataclass
class Observed:
    """Means read from a run folder's records (a key is missing where nothing was observed)."""

    answer_tokens: dict[str, float] = field(default_factory=dict)  # cell key -> completion tokens per answer
    model_tokens: dict[str, float] = field(default_factory=dict)  # model_key -> completion tokens per answer
    cell_models: dict[str, str] = field(default_factory=dict)  # cell key -> model_key of its model entry
    judge_tokens: dict[str, float] = field(default_factory=dict)  # judge id -> completion tokens per reply
    repair_rate: dict[str, float] = field(default_factory=dict)  # judge id -> repair turns per first request
    cached_share: dict[str, float] = field(default_factory=dict)  # cell key or judge id -> input from the prompt cache

    def tokens(self, source: str) -> float | None:
        """Return the observed output tokens per request of a cell key (its own answers, else those of the same
        model and params) or a judge id; None when the run folder holds no such reply."""
        if source in self.answer_tokens:
            return self.answer_tokens[source]
        model = self.cell_models.get(source)
        if model is not None and model in self.model_tokens:
            return self.model_tokens[model]
        return self.judge_tokens.get(source)


def model_key(model: str, endpoint: str | None, params: dict[str, Any] | None) -> str:
    """Return what makes two answers' lengths comparable across cells: the model string, endpoint and params."""
    return json.dumps([model, endpoint, params or {}], sort_keys=True, default=str)


def _requests(cand: Candidate, by: str) -> int:
    """Return the requests behind a candidate's ``by`` usage: its conversation's turns of ``by``, else one."""
    if cand.turns is None:
        return int(by == "model")
    return sum(isinstance(t, dict) and t.get("by", "model") == by for t in cand.turns) or int(by == "model")


def observe(store: RunStore, judges: list[Judge], cells: Iterable[Cell] = ()) -> Observed:
    """Return the means of the records in ``store`` (every attempt of every candidate and judgment); ``cells``:
    the run's cells, whose model entries name the answers of the same model and params."""
    out = Observed(cell_models={c.key: model_key(c.model.model, c.model.endpoint, dict(c.model.params))
                                for c in cells})
    sums: dict[str, list[int]] = {}
    by_model: dict[str, list[int]] = {}
    cached: dict[str, list[int]] = {}  # cell key or judge id -> [cached, prompt] tokens of paid replies
    for cand in store.iter(Candidate):
        usage = cand.usage
        _cached(cached, cand.cell, usage)
        if cand.ok and usage is not None and usage.completion_tokens is not None:
            for acc in (sums.setdefault(cand.cell, [0, 0]),
                        by_model.setdefault(model_key(cand.model, cand.endpoint, cand.params), [0, 0])):
                acc[0] += usage.completion_tokens
                acc[1] += _requests(cand, "model")
        simulated = cand.simulator_usage
        asked = _requests(cand, "simulator")
        if cand.ok and simulated is not None and simulated.completion_tokens is not None and asked:
            acc = sums.setdefault(cand.cell + SIMULATED, [0, 0])
            acc[0] += simulated.completion_tokens
            acc[1] += asked
    out.answer_tokens = {cell: total / n for cell, (total, n) in sums.items() if n}
    out.model_tokens = {key: total / n for key, (total, n) in by_model.items() if n}
    by_id = {j.entry.id: j for j in judges}
    tokens: dict[str, list[int]] = {}
    replies: dict[str, list[float]] = {}
    packs: dict[str, set[str]] = {}
    for rec in store.iter(Judgment):
        judge, usage = by_id.get(rec.judge_id), rec.usage
        if judge is None or usage is None:
            continue
        _cached(cached, rec.judge_id, usage)
        asked = usage.calls + usage.cache_hits
        if rec.ok and usage.completion_tokens is not None and asked:
            acc = tokens.setdefault(rec.judge_id, [0, 0])
            acc[0] += usage.completion_tokens
            acc[1] += asked
        acc2 = replies.setdefault(rec.judge_id, [0, 0.0])
        acc2[0] += asked
        if judge.grader.packed:  # one first-turn request per packed call, whose usage its first item carries
            if rec.pack_id and rec.pack_id not in packs.setdefault(rec.judge_id, set()):
                packs[rec.judge_id].add(rec.pack_id)
                acc2[1] += 1
        else:
            acc2[1] += judge.grader.requests_per_item(judge) / len(judge.grader.orders)
        acc2[1] += bool(rec.details.get("solution_paid"))  # the judge's own answer it paid for: a first turn too
    out.judge_tokens = {jid: total / n for jid, (total, n) in tokens.items() if n}
    out.cached_share = {key: c / p for key, (c, p) in cached.items() if p}
    out.repair_rate = {jid: min(1.0, max(0.0, (n - first) / first)) for jid, (n, first) in replies.items() if first}
    return out


def _cached(acc: dict[str, list[int]], key: str, usage: Any) -> None:
    """Add a record's paid prompt tokens, and those its provider's prompt cache served, to ``acc[key]``."""
    if usage is not None and usage.calls and usage.prompt_tokens:
        pair = acc.setdefault(key, [0, 0])
        pair[0] += usage.cached_tokens or 0
        pair[1] += usage.prompt_tokens
