"""`bench validate`, `bench estimate`, and the estimate every sweep shows (and holds to its budget) first."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from bench.core.errors import BudgetReached
from bench.core.spend import recorded_spend
from bench.estimate.cost import Estimate, estimate, needed_budget
from bench.estimate.plan import plan_requests, plan_table
from bench.estimate.show import estimate_table
from bench.models.budget import PriceUnknown, dollars
from bench.models.preflight import preflight
from bench.pipeline import Run, make_llm, open_run, shown_path


def validate(params: str | Path, cells: str | None = None) -> int:
    """`bench validate`: print the grid and, per stage, the requests a sweep would send now; run the preflight.

    Calls no model: the preflight only checks model strings, keys and that every api_base answers.
    """
    run = open_run(params, cells=cells)
    print(run.describe())
    for cell in run.cells:
        print(f"  cell {cell.key}: {cell.model.model} {cell.model.params or ''}")
    for j in run.sweep.judges:
        print(f"  judge {j.id}: {j.model}, rubric {j.rubric}")
    plans = plan_requests(run, make_llm(run))
    print("requests a sweep would send now (first turns; retries and repair turns come on top; "
          "'+?': answers not collected yet, so their judge requests cannot be looked up in the cache):")
    print(plan_table(plans))
    preflight([c.model.spec() for c in run.cells] + [j.spec() for j in run.sweep.judges])
    print("preflight: ok (every model string known, every key set, every api_base answering); nothing was called")
    return 0


def estimate_command(params: str | Path, cells: str | None = None, run_dir: str | None = None,
                     as_json: bool = False) -> int:
    """`bench estimate`: print what the next sweep will send and cost, per stage (``as_json``: one JSON object).

    Calls no model, runs no preflight, starts no server (not even the embedded model's).
    """
    run = open_run(params, cells=cells, run_dir=run_dir)
    est = estimate(run)
    if as_json:
        print(json.dumps(est.as_json(), indent=2))
        return 0
    print(run.describe())
    print(estimate_table(est, entries=entries(run), params=shown_path(run.params_path)))
    budget_line = _budget_line(run, est)
    if budget_line:
        print(budget_line)
    return 0


def before_sweep(run: Run, *, only_stage: str | None = None, groups: list[Iterable[str]] | None = None) -> Estimate:
    """Print the estimate of the sweep about to start (compact) and hold it to ``limits.budget_usd``.

    Raises BudgetReached (exit code 4; nothing is sent) when a budget is set and the run folder's recorded
    spend plus the expected cost passes it, PriceUnknown (exit 2) when some stage that will send requests
    has no known price.
    """
    est = estimate(run, only_stage=only_stage, groups=groups)
    params = shown_path(run.params_path)
    print("estimate (before anything is sent):", flush=True)
    print(estimate_table(est, compact=True, entries=entries(run), params=params), flush=True)
    check_budget(run, est)
    line = _budget_line(run, est)
    if line:
        print(line, flush=True)
    return est


def check_budget(run: Run, est: Estimate) -> None:
    """Refuse a sweep ``est`` says cannot be held to the run's ``limits.budget_usd``, before anything is sent:
    BudgetReached (exit 4, like a sweep stopped at its budget) or PriceUnknown (exit 2: declare the price)."""
    limit = run.sweep.limits.budget_usd
    if limit is None:
        return
    params = shown_path(run.params_path)
    where = entries(run)
    unpriced = [s for s in est.stages if s.cost_usd_expected is None]
    if unpriced:
        names = ", ".join(f"{where.get((s.stage, s.id), s.id)} (id {s.id}, {s.model})" for s in unpriced)
        raise PriceUnknown(f"limits.budget_usd = {dollars(limit)} is set, but the price of {names} is unknown, so the "
                         f"sweep's cost cannot be held to it; nothing was sent. Set price: {{input_per_mtok: …, "
                         f"output_per_mtok: …}} (USD per million tokens) on each in {params}, or remove "
                         f"limits.budget_usd")
    spent = recorded_spend(run.dir).usd
    expected = float(est.total["cost_usd_expected"] or 0.0)
    worst = float(est.total["cost_usd_max"] or 0.0)
    if spent + expected > limit:
        raise BudgetReached(f"this sweep is expected to cost {dollars(expected)} (at most {dollars(worst)}), and "
                         f"{shown_path(run.dir)} has spent {dollars(spent)} so far: {dollars(spent + expected)} is "
                         f"more than limits.budget_usd = {dollars(limit)}, so the sweep does not start; nothing was "
                         f"sent. Raise limits.budget_usd in {params} to at least "
                         f"{dollars(needed_budget(spent, expected))}, or run fewer cells (--cells)")


def _budget_line(run: Run, est: Estimate) -> str | None:
    """Return the line that puts the expected cost beside ``limits.budget_usd`` (None without a budget)."""
    limit = run.sweep.limits.budget_usd
    expected = est.total["cost_usd_expected"]
    if limit is None or expected is None:
        return None
    spent = recorded_spend(run.dir).usd
    return (f"budget: limits.budget_usd = {dollars(limit)}; spent so far {dollars(spent)} + expected "
            f"{dollars(float(expected))} = {dollars(spent + float(expected))}")


def entries(run: Run) -> dict[tuple[str, str], str]:
    """Return each stage's entry in the params file: ("collect", model id) -> "models[i]", judges likewise."""
    out = {("collect", m.id): f"models[{i}]" for i, m in enumerate(run.sweep.models)}
    out.update({("judge", j.id): f"judges[{i}]" for i, j in enumerate(run.sweep.judges)})
    return out
