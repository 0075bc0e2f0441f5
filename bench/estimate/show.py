"""An estimate as an aligned text table with a total line and the notes that qualify its numbers."""

from __future__ import annotations

from bench.core.outcome import row_format
from bench.estimate.bounds import CALLABLE_RESULT_TOKENS
from bench.estimate.cost import Estimate, StageEstimate
from bench.models.budget import dollars
from bench.models.ratelimit import DEFAULT_COMPLETION_TOKENS
from bench.models.tokens import IMAGE_TOKENS

FULL = ("stage", "id", "mode", "batch", "requests", "cached", "to send", "input tok", "output tok max",
        "output tok exp", "exp from", "repairs max", "cost max", "cost exp", "exp direct", "exp batch")
COMPACT = ("stage", "id", "mode", "batch", "requests", "cached", "to send", "input tok", "output tok max",
           "output tok exp", "exp from", "cost max", "cost exp")


def estimate_table(est: Estimate, *, compact: bool = False, entries: dict[tuple[str, str], str] | None = None,
                   params: str = "the params file") -> str:
    """Return ``est`` as an aligned table with a total line, then its notes. ``compact``: the columns a sweep
    prints; ``entries``: each stage's params entry ("models[0]"), so notes say where a price is missing."""
    head = COMPACT if compact else FULL
    rows = [_row(s, compact) for s in est.stages]
    rows.append(_total_row(est, compact))
    fmt = row_format([head, *rows], text_columns=4)
    lines = [fmt.format(*r) for r in [head, *rows]]
    return "\n".join(lines + notes(est, compact=compact, entries=entries or {}, params=params))


def _row(s: StageEstimate, compact: bool) -> tuple[str, ...]:
    flag = "*" if s.output_bound_from == "default" and s.to_send else ""
    row = [s.stage, s.id, s.mode, "yes" if s.batch else "no", _n(s.requests), _n(s.cached), _n(s.to_send),
           _n(s.input_tokens), _n(s.output_tokens_max) + flag, _n(s.output_tokens_expected),
           s.expected_from if s.to_send else ""]
    if not compact:
        row += [_n(s.repairs_max) if s.stage == "judge" else ""]
    row += [_usd(s.cost_usd_max), _usd(s.cost_usd_expected)]
    if not compact:
        row += [_usd(s.cost_usd_expected_direct), _usd(s.cost_usd_expected_batch)]
    return tuple(row)


def _total_row(est: Estimate, compact: bool) -> tuple[str, ...]:
    t = est.total
    row = ["total", "", "", "", _n(t["requests"]), _n(t["cached"]), _n(t["to_send"]), _n(t["input_tokens"]),
           _n(t["output_tokens_max"]), _n(t["output_tokens_expected"]), ""]
    if not compact:
        row += [_n(t["repairs_max"])]
    row += [_usd(t["cost_usd_max"]), _usd(t["cost_usd_expected"])]
    if not compact:
        row += [_usd(t["cost_usd_expected_direct"]), _usd(t["cost_usd_expected_batch"])]
    return tuple(row)


def notes(est: Estimate, *, compact: bool, entries: dict[tuple[str, str], str], params: str) -> list[str]:
    """Return the lines that qualify the table: cached, bounds, expectations, prices, stand-ins, tokenizers."""
    stages = est.stages
    where = lambda s: entries.get((s.stage, s.id), f"{s.stage} {s.id}")  # noqa: E731
    out = ["cached: held by the run folder or answered by the response cache; to send = requests - cached "
           "(first turns, and a conversation's requests to its bound; repair turns and retries come on top)"]
    if not compact:
        out.append("output tok max: each request's max_tokens, else the model's maximum output (LiteLLM's map); "
                   "output tok exp: the mean of earlier replies (exp from: run folder = its records of the cell, "
                   "else of the model and params, or of the judge; response cache = the cached replies of this "
                   "stage's own requests), else the max (assumed bound; pilot pending: a sweep measures it first)")
        out.append("cost max: every request at its output bound and one repair turn per judge request; cost exp: "
                   "the expected tokens (at the judge's observed repair rate); at the price each stage is called at "
                   "(batch: yes = the Batch API price); exp direct / exp batch: the expected cost without / with "
                   "the Batch API")
    if cached := [s for s in stages if s.cached_share and s.to_send]:
        out.append(f"prompt cache: {', '.join(f'{where(s)} ({s.id}) {s.cached_share:.0%}' for s in cached)} of the "
                   f"expected input served from the provider's prompt cache, the share of the run folder's records; "
                   f"cost exp prices it at the cached input price, cost max never assumes a hit")
    elif not compact and any(s.to_send for s in stages):
        out.append("prompt cache: none assumed (no record of the run folder shows cached input): cost exp is at the "
                   "full input price")
    if bounded := [s for s in stages if s.bounded_by]:
        out.append(f"conversations: {'; '.join(f'{where(s)} ({s.id}): {s.bounded_by}' for s in bounded)}. "
                   f"Their requests are bounded: a turns script by its turns, a simulated user by max_turns "
                   f"(max_turns model requests and max_turns - 1 of the simulator, on its own line), a tool loop by "
                   f"max_steps requests per assistant turn (each step adding one tool call and its result: a "
                   f"template filled, a Python tool's at {CALLABLE_RESULT_TOKENS} tokens); a later request's input "
                   f"holds the replies before it at their output bound (input tok, cost max; cost exp: at their "
                   f"expected length); what the response cache holds is replayed, not counted")
    if flagged := [s for s in stages if s.output_bound_from == "default" and s.to_send]:
        out.append(f"* no max_tokens set and the model's maximum output is unknown: {DEFAULT_COMPLETION_TOKENS} "
                   f"tokens per request assumed for {', '.join(f'{where(s)} ({s.id})' for s in flagged)}; set "
                   f"params.max_tokens there in {params} for a tighter bound")
    if unpriced := [s for s in stages if s.cost_usd_expected is None]:
        out.append(f"? price unknown: set price: {{input_per_mtok: …, output_per_mtok: …}} (USD per million "
                   f"tokens) on {', '.join(f'{where(s)} ({s.id}: {s.model})' for s in unpriced)} in {params}")
    if thinking := [s for s in stages if s.reasoning and s.to_send]:
        out.append(f"reasoning: {', '.join(f'{where(s)} ({s.id})' for s in thinking)} think before answering: their "
                   f"thinking tokens are output tokens, in output tok max (max_tokens bounds thinking and answer "
                   f"together) and output tok exp, and priced as output")
    if pictured := [s for s in stages if s.images and s.to_send]:
        out.append(f"images: {', '.join(f'{where(s)} ({s.id}: {s.images:,})' for s in pictured)} send image parts, "
                   f"each counted as {IMAGE_TOKENS:,} tokens in input tok: a bound above what providers bill for one "
                   f"image (gpt-4o-mini aside: docs/budget.md), so their input tokens and costs are upper bounds")
    if unknown := sum(s.unknown for s in stages):
        out.append(f"{unknown:,} judge request(s) grade answers not collected yet: their tokens are estimated with a "
                   f"stand-in answer of the expected length; whether the cache holds them is known once they exist")
    for note in dict.fromkeys(s.tokenizer_note for s in stages if s.tokenizer_note and s.to_send):
        out.append(f"tokens: {note}")
    return out


def _n(value: int | float | None) -> str:
    return "" if value is None else f"{round(value):,}"


def _usd(value: float | None) -> str:
    return "?" if value is None else dollars(value)
