"""The tokens and dollars of the next sweep, per stage, before anything is sent (`bench estimate`): a bound and an
expected cost (``expected_from``); an unknown price gives None. docs/budget.md explains the columns."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields

from bench.config.params import Cell
from bench.estimate.bounds import SIMULATED, Ask
from bench.estimate.observed import Observed, observe
from bench.estimate.work import EMBEDDINGS, Placeholder, StageWork, stage_work
from bench.judge.judgments import load_judges
from bench.models.cache import open_cache
from bench.models.client import LLM
from bench.models.reasoning import thinks
from bench.models.routing import Route, cache_prices, price_per_token, resolve
from bench.models.tokens import PER_MESSAGE, TokenCounter, counter_for, image_parts, output_bound
from bench.run import Run

REPAIR_TOKENS = 40  # the repair turn's own message ("Your reply could not be used: <reason>. …") and framing
PLACEHOLDER_WORD = "text"  # one token in the common tokenizers, about as long as an average token
FROM_RECORDS, FROM_CACHE, ASSUMED, PILOT = "run folder", "response cache", "assumed bound", "pilot pending"
NO_OUTPUT = "no output"  # an embeddings stage's: its cost is its input
TOTALS = ("requests", "cached", "held", "cache_hits", "to_send", "unknown", "input_tokens", "output_tokens_max",
          "output_tokens_expected", "repairs_max", "cost_usd_max", "cost_usd_expected", "cost_usd_expected_direct",
          "cost_usd_expected_batch", "cost_usd_min")


@dataclass
class StageEstimate:
    """The requests, tokens and cost of one stage (a model's collect, or one judge) in the next sweep."""

    stage: str
    id: str
    mode: str
    model: str  # the LiteLLM model string
    batch: bool  # called through the provider's Batch API
    requests: int  # first-turn requests of every item the sweep plans (held + still to ask)
    cached: int  # of those, not sent: held by the run folder or answered by the response cache
    held: int  # ... held by the run folder (items already done)
    cache_hits: int  # ... answered by the response cache (or identical to a request counted before)
    to_send: int  # requests - cached: what goes in flight (repair turns and retries come on top)
    unknown: int  # of to_send, judge requests of answers not collected yet (cache not checkable)
    input_tokens: int
    output_tokens_max: int
    output_tokens_expected: int
    output_bound: int  # per request
    output_bound_from: str  # "max_tokens", "model" or "default"
    expected_from: str  # FROM_RECORDS, FROM_CACHE, ASSUMED, PILOT or NO_OUTPUT ("a+b" when asks differ; "": none)
    repairs_max: int
    repair_rate: float
    tokenizer: str
    tokenizer_note: str | None
    price_known: bool
    cost_usd_max: float | None
    cost_usd_expected: float | None
    cost_usd_expected_direct: float | None
    cost_usd_expected_batch: float | None
    cost_usd_min: float | None  # the prompts alone (every reply empty)
    reasoning: bool = False  # the model thinks first: its thinking is in the output tokens (bench.models.reasoning)
    images: int = 0  # image parts of the requests to send, each in input_tokens at tokens.IMAGE_TOKENS (a bound)
    bounded_by: str = ""  # its conversations' bounds: "support@v1 bounded by max_turns 6 and max_steps 8" ("": none)
    cached_share: float = 0.0  # of the expected input, served by the provider's prompt cache (the run folder's share)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Estimate:
    """Every stage's estimate and their sum."""

    stages: list[StageEstimate]

    @property
    def total(self) -> dict[str, float | int | None]:
        """Return the numeric keys summed (a cost is None when some stage's is)."""
        out: dict[str, float | int | None] = {}
        for key in TOTALS:
            values = [getattr(s, key) for s in self.stages]
            out[key] = None if any(v is None for v in values) else (
                round(sum(values), 9) if key.startswith("cost") else sum(values))
        return out

    def as_json(self) -> dict:
        """Return ``{"stages": [...], "total": {...}}`` (what `bench estimate --json` prints)."""
        return {"stages": [s.as_dict() for s in self.stages], "total": self.total}


def estimate(run: Run, llm: LLM | None = None, *, only_stage: str | None = None,
             groups: list[Iterable[str]] | None = None, cache: str | None = None) -> Estimate:
    """Return the estimate of the next sweep of ``run``; calls no model, starts no server. ``only_stage`` and
    ``groups`` as in :func:`bench.estimate.work.stage_work`; ``cache``: the response cache the sweep reads."""
    own = llm is None
    llm = llm or LLM(run.sweep.limits, cache=open_cache(cache, root=run.root))
    try:
        seen = observe(run.store, load_judges(run), run.sweep.cells())
        work = stage_work(run, llm, _placeholders(seen), only_stage=only_stage, groups=groups,
                          simulated=_simulated(seen))
        return Estimate([_stage(w, resolve(w.spec), seen) for w in work])
    finally:
        if own and llm.cache is not None:
            llm.cache.close()


def _placeholders(seen: Observed) -> Placeholder:
    """Return the stand-in answer of a cell not collected yet: as many one-token words as its answers are
    expected to take (observed mean, else its model's cached replies' mean, else its output bound)."""
    memo: dict[str, str] = {}

    def placeholder(cell: Cell, cached: float | None) -> str:
        text = memo.get(cell.key)
        if text is None:
            n = seen.tokens(cell.key)
            n = n if n is not None else cached if cached is not None else output_bound(resolve(cell.model.spec()))[0]
            text = memo[cell.key] = " ".join([PLACEHOLDER_WORD] * max(1, round(n)))
        return text

    return placeholder


def _simulated(seen: Observed) -> Callable[[Cell], str]:
    """Return the stand-in of a simulated user's turn in a cell not collected yet: as many words as its turns are
    expected to take (observed in the cell), else its simulator's output bound."""
    def simulated(cell: Cell) -> str:
        sim = cell.prompt.user_simulator
        n = seen.tokens(cell.key + SIMULATED)
        n = n if n is not None else output_bound(resolve(sim.spec()))[0] if sim is not None else 0
        return " ".join([PLACEHOLDER_WORD] * max(1, round(n)))

    return simulated


def _input(counter: TokenCounter, ask: Ask, mean: Callable[[str], float | None] | None = None) -> float:
    """Return an ask's input tokens: its messages, its tool definitions, and the earlier replies its history
    holds, each at its bound, or (``mean``) at the observed mean of whose reply it is when there is one."""
    tokens = counter.messages(ask.messages) + (counter.text(ask.tools) if ask.tools else 0)
    for source, count, bound in ask.history:
        observed = mean(source) if mean is not None and source is not None else None
        tokens += count * (PER_MESSAGE + (bound if observed is None else observed))
    return tokens


def _stage(w: StageWork, route: Route, seen: Observed) -> StageEstimate:
    counter = counter_for(route)
    n = len(w.asks)
    input_tokens = sum(_input(counter, a) for a in w.asks)
    input_likely = sum(_input(counter, a, seen.tokens) for a in w.asks) if any(a.history for a in w.asks) \
        else input_tokens
    input_floor = sum(_input(counter, a, lambda _source: 0.0) for a in w.asks) if input_likely != input_tokens \
        else input_tokens  # every reply empty: a conversation's earlier replies too
    embeds = w.mode == EMBEDDINGS  # no output to bound, expect or measure by a pilot; never batched
    bound, bound_from = (0, EMBEDDINGS) if embeds else output_bound(route)
    expected, expected_from = (0, NO_OUTPUT) if embeds else _expected(w, seen, bound)
    judge = w.stage == "judge" and not embeds
    rate = seen.repair_rate.get(w.id, 0.0) if judge else 0.0
    repairs = n if judge else 0
    # the most: every request takes its whole bound, and each judge request one repair turn (input: the
    # request, its reply and the repair message; output: the bound again); expected: at the observed rate
    repair_input = input_tokens + n * REPAIR_TOKENS if repairs else 0
    worst = (input_tokens + repair_input + repairs * bound, (n + repairs) * bound)
    likely = (input_likely + rate * (repair_input + expected), expected * (1 + rate))
    at, direct, batched = price_per_token(route), price_per_token(route, False), price_per_token(route, not embeds)
    share = {a.source: seen.cached_share.get(a.source, 0.0) for a in w.asks}
    hits = sum(_input(counter, a, seen.tokens) * share[a.source] for a in w.asks) if any(share.values()) else 0.0
    cost = lambda price, tokens, batch=route.spec.batch is not None: _less(  # noqa: E731
        _usd(price, tokens, n), hits * _cache_discount(route, batch))
    return StageEstimate(
        stage=w.stage, id=w.id, mode=w.mode, model=route.spec.model, batch=route.spec.batch is not None,
        requests=w.held + w.requests, cached=w.held + w.cached, held=w.held, cache_hits=w.cached, to_send=n,
        unknown=w.unknown, input_tokens=input_tokens, output_tokens_max=n * bound, output_tokens_expected=expected,
        output_bound=bound, output_bound_from=bound_from,
        expected_from=expected_from,
        repairs_max=repairs, repair_rate=round(rate, 4), tokenizer=counter.tokenizer, tokenizer_note=counter.note,
        price_known=at is not None, cost_usd_max=_usd(at, worst, n), cost_usd_expected=cost(at, likely),
        cost_usd_expected_direct=cost(direct, likely, False), cost_usd_expected_batch=cost(batched, likely, True),
        cost_usd_min=_usd(at, (input_floor, 0), n), reasoning=thinks(route.spec),
        cached_share=round(hits / input_likely, 4) if input_likely else 0.0,
        images=sum(image_parts(a.messages) for a in w.asks),
        bounded_by="; ".join(f"{key} bounded by {words}" for key, words in w.bounds.items()))


def _expected(w: StageWork, seen: Observed, bound: int) -> tuple[int, str]:
    """Return the output tokens ``w``'s requests are expected to take, and where that comes from."""
    cached = sum(w.replies) / len(w.replies) if w.replies else None
    total, sources = 0.0, {}
    for ask in w.asks:
        mean = seen.tokens(ask.source)
        tokens, source = ((mean, FROM_RECORDS) if mean is not None else (cached, FROM_CACHE) if cached is not None
                          else (bound, ASSUMED))
        total += tokens
        sources[source] = None
    return round(total), "+".join(sources)


def _usd(price: tuple[float, float] | None, tokens: tuple[float, float], requests: int) -> float | None:
    """Return the USD of (input, output) tokens at ``price``; 0 when nothing is sent, None when unpriced."""
    if requests == 0:
        return 0.0
    if price is None:
        return None
    return round(price[0] * tokens[0] + price[1] * tokens[1], 9)


def _cache_discount(route: Route, batch: bool) -> float:
    """Return what a token served by the provider's prompt cache costs less than the input price."""
    price, cached = price_per_token(route, batch), cache_prices(route, batch)
    return 0.0 if price is None or cached is None else price[0] - cached[0]


def _less(usd: float | None, saved: float) -> float | None:
    return usd if usd is None or not saved else round(usd - saved, 9)


def needed_budget(spent: float, expected: float) -> float:
    """Return the smallest budget, in whole cents, that covers ``spent`` plus ``expected``."""
    return math.ceil(round((spent + expected) * 100, 6)) / 100
