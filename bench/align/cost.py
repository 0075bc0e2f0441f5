"""What `bench align` will send and may cost, before it sends anything, and its hold on ``limits.budget_usd``.
Unwritten anchors count as the current rubric's request plus the optimizer's whole output limit, never cached."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.align.crossval import Setup
from bench.align.folds import Fold
from bench.align.optimizer import optimizer_format, optimizer_messages, parse_rewrites
from bench.align.reviews import ReviewedAnswer
from bench.align.variants import Anchors, pick_examples, variant_rubric, variant_text
from bench.config.reply_schemas import response_format
from bench.core.errors import BudgetReached, JudgeParseError
from bench.core.spend import recorded_spend
from bench.models.budget import PriceUnknown, dollars
from bench.judge import Judge
from bench.judge.rubric import rubric_messages
from bench.models.client import LLM
from bench.models.routing import ModelSpec, price_per_token, resolve
from bench.models.tokens import counter_for, output_bound

Request = tuple[list[dict], dict]  # (messages, response_format)


@dataclass
class Planned:
    """The requests of one model in `bench align`, and what they may cost."""

    role: str  # "judge" or "optimizer"
    model: str
    requests: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens_max: int = 0
    cost_min: float | None = 0.0  # prompts alone (None: price unknown)
    cost_max: float | None = 0.0  # prompts and every output at its bound

    @property
    def to_send(self) -> int:
        return self.requests - self.cached


@dataclass
class AlignEstimate:
    """Every model's planned requests (:class:`Planned`)."""

    planned: list[Planned] = field(default_factory=list)

    def total(self, key: str) -> float | None:
        values = [getattr(p, key) for p in self.planned]
        return None if any(v is None for v in values) else sum(values)

    def line(self) -> str:
        """Return the estimate as the command prints it: requests to send per model, then the cost bounds."""
        parts = [f"{p.role} {p.model}: {p.to_send} of {p.requests} requests to send ({p.cached} cached)"
                 for p in self.planned]
        lo, hi = self.total("cost_min"), self.total("cost_max")
        cost = "cost unknown (no price)" if lo is None or hi is None else f"cost {dollars(lo)} to {dollars(hi)}"
        return "estimate: " + "; ".join(parts) + f"; {cost}"


def plan(llm: LLM, spec: ModelSpec, role: str, known: list[Request], unknown: list[tuple[Request, int]]) -> Planned:
    """Return the plan of one model: ``known`` requests (looked up in the cache) and ``unknown`` ones, each a
    stand-in request and the tokens its prompt may hold on top (never cached)."""
    route = resolve(spec)
    counter, bound = counter_for(route), output_bound(route)[0]
    price = price_per_token(route)
    out = Planned(role, spec.model, requests=len(known) + len(unknown))
    keys = [llm.request_key(spec, m, response_format=rf) for m, rf in known]
    out.cached = sum(1 for key in dict.fromkeys(keys) if llm.cache is not None and llm.cache.get(key) is not None)
    out.cached += len(keys) - len(dict.fromkeys(keys))  # an identical request is sent once
    seen: set[str] = set()
    for (messages, _rf), key in zip(known, keys, strict=True):
        if key not in seen and (llm.cache is None or llm.cache.get(key) is None):
            out.input_tokens += counter.messages(messages)
            out.output_tokens_max += bound
        seen.add(key)
    for (messages, _rf), extra in unknown:
        out.input_tokens += counter.messages(messages) + extra
        out.output_tokens_max += bound
    if price is None:
        out.cost_min = out.cost_max = None if out.to_send else 0.0
    else:
        out.cost_min = price[0] * out.input_tokens
        out.cost_max = out.cost_min + price[1] * out.output_tokens_max
    return out


def hold_to_budget(est: AlignEstimate, llm: LLM, params: str) -> None:
    """Raise before anything is sent when ``limits.budget_usd`` cannot hold `bench align`: a model with requests
    to send has no known price (PriceUnknown), or their prompts alone pass what is left (BudgetReached)."""
    if llm.budget is None:
        return
    unpriced = [p.model for p in est.planned if p.cost_min is None]
    if unpriced:
        raise PriceUnknown(f"limits.budget_usd is set, but the price of {', '.join(unpriced)} is unknown, so its "
                           f"spend cannot be capped; nothing was sent. Declare it in {params} (price: "
                           f"{{input_per_mtok: …, output_per_mtok: …}}), or remove limits.budget_usd")
    left = llm.budget.limit - recorded_spend(llm.budget.run_dir).usd
    least = est.total("cost_min") or 0.0
    if least > left:
        raise BudgetReached(f"limits.budget_usd = {dollars(llm.budget.limit)}: {dollars(max(left, 0.0))} is left, "
                            f"and bench align's prompts alone cost {dollars(least)}; nothing was sent. Raise "
                            f"limits.budget_usd in {params}, lower --k or align.max_examples")


def align_estimate(setup: Setup, answers: list[ReviewedAnswer], folds: list[Fold]) -> AlignEstimate:
    """Return what cross-validating ``setup`` on ``folds`` (and writing its anchors over every answer) will send:
    the judge's requests of every variant on every held-out answer, the optimizer's per fold and once more."""
    by_unit = {a.unit: a for a in answers}
    judge, rubric = setup.judge, setup.judge.rubric
    extra = output_bound(resolve(setup.optimizer))[0] if setup.optimizer is not None else 0
    rf = response_format(rubric.item_schema(), "grade")
    known: list[Request] = []
    unknown: list[tuple[Request, int]] = []
    asks: list[Request] = []
    for fold in folds:
        train = [by_unit[u] for u in fold.train]
        shown = pick_examples(train, setup.max_examples)
        examples = Judge(judge.entry, variant_rubric(variant_text(rubric, setup.rubric_id, examples=shown),
                                                     rubric.path.parent, setup.rubric_id))
        ask = (optimizer_messages(rubric, shown), optimizer_format(rubric))
        anchors = _cached_anchors(setup, ask) if setup.optimizer is not None else None
        rewritten = [Judge(judge.entry, variant_rubric(variant_text(rubric, setup.rubric_id, anchors=anchors,
                                                                    examples=e), rubric.path.parent, setup.rubric_id))
                     for e in ([], shown)] if anchors is not None else []
        for unit in fold.test:
            item = by_unit[unit].item
            known.append((rubric_messages(examples, item)[0], rf))
            known += [(rubric_messages(j, item)[0], rf) for j in rewritten]  # anchors the cache already holds
            if setup.optimizer is not None and anchors is None:  # not written yet: as the rubric is, plus the most
                unknown += [((rubric_messages(judge, item)[0], rf), extra), ((known[-1][0], rf), extra)]  # it adds
        if setup.optimizer is not None:
            asks.append(ask)
    planned = [plan(setup.llm, judge.entry.spec(), "judge", known, unknown)]
    if setup.optimizer is not None:
        asks.append((optimizer_messages(rubric, pick_examples(answers, setup.max_examples)), optimizer_format(rubric)))
        planned.append(plan(setup.llm, setup.optimizer, "optimizer", asks, []))
    return AlignEstimate(planned)


def _cached_anchors(setup: Setup, ask: Request) -> Anchors | None:
    """Return the anchor rewrites of an optimizer request the response cache holds a usable reply to, else None."""
    hit = setup.llm.cache.get(setup.llm.request_key(setup.optimizer, ask[0], response_format=ask[1])) \
        if setup.llm.cache is not None else None
    try:
        return parse_rewrites(hit["text"], setup.judge.rubric)[0] if hit is not None else None
    except JudgeParseError:
        return None
