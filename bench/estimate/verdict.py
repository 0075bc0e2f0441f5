"""What an estimate means for ``limits.budget_usd`` before a sweep starts: ``fits``, ``expected``, ``pilot`` (first)
or ``refused`` (docs/budget.md, A hard budget)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.core.errors import BudgetReached
from bench.core.spend import recorded_spend
from bench.estimate.cost import ASSUMED, PILOT, Estimate, StageEstimate, needed_budget
from bench.models.budget import cache_holding, dollars
from bench.run import Run, shown_path


@dataclass
class Verdict:
    """A sweep's estimate beside its budget, in USD (``expected``, ``worst`` and ``floor`` exclude ``spent``)."""

    limit: float
    spent: float  # the run folder's recorded spend
    expected: float  # the expected cost (a stage to pilot: at its output bound, as nothing says better)
    worst: float  # every request at its output bound, each judge request with one repair turn
    floor: float  # the expected cost with the stages to pilot at their prompts alone (a judge's: stand-in answers)
    pilot: list[StageEstimate] = field(default_factory=list)  # stages whose reply length a pilot measures first
    assumed: list[StageEstimate] = field(default_factory=list)  # paid stages whose reply length nothing observed
    rest: list[StageEstimate] = field(default_factory=list)  # paid stages not piloted: in ``floor`` at their expected cost
    estimated: float = 0.0  # of ``spent``, requests a kill left in flight (bench.core.spend: lost_in_flight_usd)
    estimated_note: str = ""  # " (of which $X estimated: …)" (``RunSpend.estimated_note``)

    @property
    def outcome(self) -> str:
        """Return "fits", "expected", "pilot" or "refused" (the module's docstring says what each does)."""
        if self.spent + self.worst <= self.limit:
            return "fits"
        if self.spent + self.expected <= self.limit:
            return "expected"
        if self.pilot and self.spent + self.floor <= self.limit:
            return "pilot"
        return "refused"

    def as_json(self) -> dict:
        """Return the verdict as `bench estimate --json` prints it under "budget"."""
        return {"limit_usd": self.limit, "spent_usd": round(self.spent, 9), "expected_usd": round(self.expected, 9),
                "worst_usd": round(self.worst, 9), "floor_usd": round(self.floor, 9), "outcome": self.outcome,
                "pilot": [f"{s.stage} {s.id}" for s in self.pilot] if self.outcome == "pilot" else [],
                "spent_estimated_usd": round(self.estimated, 9)}


def budget_verdict(run: Run, est: Estimate, *, pilot: bool = True) -> Verdict | None:
    """Return ``est`` beside ``limits.budget_usd`` (None without a budget, or when some price is unknown),
    marking the stages a pilot will measure ``expected_from = "pilot pending"`` (none when ``pilot=False``)."""
    limit = run.sweep.limits.budget_usd
    total = est.total
    if limit is None or total["cost_usd_expected"] is None:
        return None
    assumed = [s for s in est.stages if _unmeasured(s)]
    measured = [s for s in assumed if not s.batch] if pilot and run.sweep.limits.pilot > 0 else []
    piloted = {id(s) for s in measured}
    floor = sum(float((s.cost_usd_min if id(s) in piloted else s.cost_usd_expected) or 0.0) for s in est.stages)
    spend = recorded_spend(run.dir, cache_holding(run.dir))  # a kill's requests in flight count at once
    out = Verdict(float(limit), spend.usd, float(total["cost_usd_expected"] or 0.0),
                  float(total["cost_usd_max"] or 0.0), floor, measured, assumed,
                  [s for s in est.stages if id(s) not in piloted and (s.cost_usd_expected or 0) > 0],
                  estimated=spend.lost_in_flight_usd, estimated_note=spend.estimated_note())
    if out.outcome == "pilot":
        for s in measured:
            s.expected_from = PILOT
    return out


def _unmeasured(s: StageEstimate) -> bool:
    """Return True for a paid stage with requests to send whose reply length is assumed (nothing observed).
    A pilot measures those not sent through a provider's Batch API (a batch takes minutes to hours)."""
    return bool(s.to_send and ASSUMED in s.expected_from.split("+") and (s.cost_usd_max or 0) > 0)


def verdict_line(run: Run, v: Verdict) -> str:
    """Return the one line a sweep (and `bench estimate`) prints about its budget."""
    spent = dollars(v.spent) + v.estimated_note
    head = (f"budget: limits.budget_usd = {dollars(v.limit)}; spent so far {spent} + "
            f"expected {dollars(v.expected)} = {dollars(v.spent + v.expected)}")
    outcome = v.outcome
    if outcome == "fits":
        return f"{head}; even the worst case ({dollars(v.spent + v.worst)}) fits"
    if outcome == "expected":
        return (f"{head} fits, the worst case ({dollars(v.spent + v.worst)}) does not: the sweep stops at the budget "
                f"if the replies run longer than expected (every request reserves its worst case first)")
    if outcome == "pilot":
        return (f"budget: limits.budget_usd = {dollars(v.limit)}; spent so far {spent}; no reply of "
                f"{stage_names(v.pilot)} has been observed, so a sweep first sends a pilot (the first "
                f"limits.pilot = {run.sweep.limits.pilot} answers per model and their grades), then starts the rest "
                f"only if its expected cost, from the pilot's replies, fits (the worst case is "
                f"{dollars(v.spent + v.worst)}; the prompts alone {dollars(v.spent + v.floor)})")
    return f"{head} is more than the budget: a sweep would not start (the worst case is {dollars(v.spent + v.worst)})"


def refusal(run: Run, v: Verdict, after_pilot: str | None = None) -> BudgetReached:
    """Return the BudgetReached (exit 4) of a sweep refused by ``v``, before anything or after the pilot was sent."""
    params, folder, spent = shown_path(run.params_path), shown_path(run.dir), dollars(v.spent) + v.estimated_note
    need = dollars(needed_budget(v.spent, v.expected))
    if after_pilot is not None:
        note = (f" ({stage_names(v.assumed)}: no reply observed in the pilot, assumed at the output bound)"
                if v.assumed else "")
        return BudgetReached(f"after the pilot ({after_pilot}), the rest of this sweep is expected to cost "
                             f"{dollars(v.expected)}{note} (at most {dollars(v.worst)}), and {folder} has spent "
                             f"{spent} so far, the pilot included: {dollars(v.spent + v.expected)} is more "
                             f"than limits.budget_usd = {dollars(v.limit)}, so the rest does not start; the pilot's "
                             f"records are kept. Raise limits.budget_usd in {params} to at least {need} and re-run "
                             f"to continue, or run fewer cells (--cells)")
    if v.pilot:
        return BudgetReached(f"this sweep is expected to cost {dollars(v.expected)} (at most {dollars(v.worst)}; "
                             f"{stage_names(v.pilot)} at the output bound, as no reply of theirs was observed), and "
                             f"{folder} has spent {spent} so far: even if {stage_names(v.pilot)} replied "
                             f"nothing, {dollars(v.spent + v.floor)} ({floor_holds(v)}) is more than "
                             f"limits.budget_usd = {dollars(v.limit)}, so "
                             f"the sweep does not start; nothing was sent (no pilot either). Raise limits.budget_usd "
                             f"in {params} to at least {need} (from {dollars(needed_budget(v.spent, v.floor))}, a "
                             f"pilot measures the replies first), or run fewer cells (--cells)")
    note = (f"; {stage_names(v.assumed)} at the output bound, as no reply of theirs was observed and no pilot is "
            f"sent (limits.pilot = 0, a Batch API model, or a cluster sweep)") if v.assumed else ""
    return BudgetReached(f"this sweep is expected to cost {dollars(v.expected)} (at most {dollars(v.worst)}{note}), and "
                         f"{folder} has spent {spent} so far: {dollars(v.spent + v.expected)} is more "
                         f"than limits.budget_usd = {dollars(v.limit)}, so the sweep does not start; nothing was "
                         f"sent. Raise limits.budget_usd in {params} to at least {need}, or run fewer cells (--cells)")


def floor_holds(v: Verdict) -> str:
    """Return what a refusal's floor holds, truthfully: the piloted stages' prompts alone (a judge's prompts hold
    the stand-in answers it would grade, at their assumed length), every other stage at its expected cost."""
    said = "their prompts alone" if len(v.pilot) > 1 else "its prompts alone"
    if any(s.stage == "judge" for s in v.pilot):
        said += ", the judges' holding stand-in answers of the length assumed for them"
    return said + (f"; {stage_names(v.rest)} at their expected cost" if v.rest else "")


def stage_names(stages: list[StageEstimate]) -> str:
    """Return "collect m1, judge grader": the stages named as the estimate's table names them."""
    return ", ".join(f"{s.stage} {s.id}" for s in stages)
