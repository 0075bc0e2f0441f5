"""What earlier records of a run folder say about the next requests: reply lengths and repair turns.

- Answers: the mean completion tokens of a cell's successful candidates (every attempt kept in the
  store), per cell key.
- Judges: the mean completion tokens per reply behind a judge's successful judgments (replies: the
  requests sent and the cache hits, ``usage.calls + usage.cache_hits``), per judge id; and its repair
  rate: the replies beyond the first-turn requests, over every judgment with a usage (failures
  included), per first-turn request. Retries of failed requests count as repairs here: the rate errs
  high, never low.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.judge.grader import Judge


@dataclass
class Observed:
    """Means read from a run folder's records (a key is missing where nothing was observed)."""

    answer_tokens: dict[str, float] = field(default_factory=dict)  # cell key -> completion tokens per answer
    judge_tokens: dict[str, float] = field(default_factory=dict)  # judge id -> completion tokens per reply
    repair_rate: dict[str, float] = field(default_factory=dict)  # judge id -> repair turns per first request

    def tokens(self, source: str) -> float | None:
        """Return the observed output tokens per request of a cell key or a judge id (None: none observed)."""
        return self.answer_tokens.get(source, self.judge_tokens.get(source))


def observe(store: RunStore, judges: list[Judge]) -> Observed:
    """Return the means of the records in ``store`` (every attempt of every candidate and judgment)."""
    out = Observed()
    sums: dict[str, list[int]] = {}
    for cand in store.iter(Candidate):
        usage = cand.usage
        if cand.ok and usage is not None and usage.completion_tokens is not None:
            acc = sums.setdefault(cand.cell, [0, 0])
            acc[0] += usage.completion_tokens
            acc[1] += 1
    out.answer_tokens = {cell: total / n for cell, (total, n) in sums.items() if n}
    by_id = {j.entry.id: j for j in judges}
    tokens: dict[str, list[int]] = {}
    replies: dict[str, list[float]] = {}
    batches: dict[str, set[str]] = {}
    for rec in store.iter(Judgment):
        judge, usage = by_id.get(rec.judge_id), rec.usage
        if judge is None or usage is None:
            continue
        asked = usage.calls + usage.cache_hits
        if rec.ok and usage.completion_tokens is not None and asked:
            acc = tokens.setdefault(rec.judge_id, [0, 0])
            acc[0] += usage.completion_tokens
            acc[1] += asked
        acc2 = replies.setdefault(rec.judge_id, [0, 0.0])
        acc2[0] += asked
        if judge.grader.packed:  # one first-turn request per packed call, whose usage its first item carries
            if rec.batch_id and rec.batch_id not in batches.setdefault(rec.judge_id, set()):
                batches[rec.judge_id].add(rec.batch_id)
                acc2[1] += 1
        else:
            acc2[1] += judge.grader.requests_per_item(judge) / len(judge.grader.orders)
    out.judge_tokens = {jid: total / n for jid, (total, n) in tokens.items() if n}
    out.repair_rate = {jid: min(1.0, max(0.0, (n - first) / first)) for jid, (n, first) in replies.items() if first}
    return out
