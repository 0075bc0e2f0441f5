"""`bench validate`, `bench estimate`, and the estimate every sweep shows (and holds to its budget) first."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from bench.core.digests import supersede
from bench.estimate.cost import Estimate, estimate
from bench.estimate.pilot import send_pilot
from bench.estimate.plan import plan_requests, plan_table
from bench.estimate.show import estimate_table
from bench.estimate.verdict import Verdict, budget_verdict, refusal, verdict_line
from bench.judge.automated import inapplicable_checks
from bench.judge.judgments import load_judges
from bench.models.budget import PriceUnknown, dollars
from bench.models.preflight import preflight
from bench.run import Run, open_run, shown_path
from bench.stage_runs import called_specs, make_llm


def validate(params: str | Path, cells: str | None = None) -> int:
    """`bench validate`: print the grid and, per stage, the requests a sweep would send now; run the preflight.
    Calls no model: the preflight only checks model strings, keys and that every api_base answers."""
    run = open_run(params, cells=cells)
    print(run.describe())
    for cell in run.cells:
        print(f"  cell {cell.key}: {cell.model.model} {cell.model.params or ''}")
    for j in run.sweep.judges:
        print(f"  judge {j.id}: {j.model or 'no model (checks only)'}, rubric {j.rubric}")
    plans = plan_requests(run, make_llm(run))
    print("requests a sweep would send now (first turns; retries and repair turns come on top; "
          "'+?': answers not collected yet, so their judge requests cannot be looked up in the cache):")
    print(plan_table(plans))
    judges = load_judges(run)
    for line in inapplicable_checks(judges, run.scenarios):
        print(f"warning: {line}")
    preflight(called_specs(run, judges))
    print("preflight: ok (every model string known, every key set, every api_base answering); nothing was called")
    return 0


def estimate_command(params: str | Path, cells: str | None = None, run_dir: str | None = None,
                     as_json: bool = False) -> int:
    """`bench estimate`: print what the next sweep will send and cost, per stage (``as_json``: one JSON object),
    and its budget verdict. Calls no model, runs no preflight, starts no server."""
    run = open_run(params, cells=cells, run_dir=run_dir)
    est = estimate(run)
    verdict = budget_verdict(run, est)  # marks the stages a sweep would pilot first
    if as_json:
        print(json.dumps({**est.as_json(), "budget": None if verdict is None else verdict.as_json()}, indent=2))
        return 0
    print(run.describe())
    print(estimate_table(est, entries=entries(run), params=shown_path(run.params_path)))
    if verdict is not None:
        print(verdict_line(run, verdict))
    return 0


def before_sweep(run: Run, *, only_stage: str | None = None, groups: list[Iterable[str]] | None = None,
                 pilot: bool = True, changed: list | None = None, cache: str | None = None) -> Estimate:
    """Print the estimate of the sweep about to start and hold it to ``limits.budget_usd``; return it. Sends the
    pilot first when the verdict hangs on unmeasured replies (unless ``pilot=False``), then estimates again.
    Raises BudgetReached (exit 4) past the budget, PriceUnknown (exit 2) for a stage with no known price."""
    est = estimate(run, only_stage=only_stage, groups=groups, cache=cache)
    params = shown_path(run.params_path)
    verdict = budget_verdict(run, est, pilot=pilot)
    print("estimate (before anything is sent):", flush=True)
    print(estimate_table(est, compact=True, entries=entries(run), params=params), flush=True)
    check_budget(run, est, verdict, pilot=pilot)
    if verdict is not None and verdict.outcome == "pilot":
        print(verdict_line(run, verdict), flush=True)
        supersede(run.dir, changed or [], params)
        sent = send_pilot(run, verdict.pilot, only_stage)
        est = estimate(run, only_stage=only_stage, groups=groups)
        verdict = budget_verdict(run, est, pilot=False)
        print(f"estimate after the pilot ({sent}):", flush=True)
        print(estimate_table(est, compact=True, entries=entries(run), params=params), flush=True)
        check_budget(run, est, verdict, after_pilot=sent)
    if verdict is not None:
        print(verdict_line(run, verdict), flush=True)
    return est


def check_budget(run: Run, est: Estimate, verdict: Verdict | None = None, *, after_pilot: str | None = None,
                 pilot: bool = True) -> None:
    """Refuse a sweep ``est`` says cannot be held to ``limits.budget_usd``, before anything (more) is sent:
    BudgetReached (exit 4) or PriceUnknown (exit 2). ``after_pilot``: what the pilot sent, when it has run."""
    limit = run.sweep.limits.budget_usd
    if limit is None:
        return
    params = shown_path(run.params_path)
    where = entries(run)
    unpriced = [s for s in est.stages if s.cost_usd_expected is None]
    if unpriced:
        names = ", ".join(f"{where.get((s.stage, s.id), s.id)}{'.embedding_model' * (s.mode == 'embeddings')} "
                          f"(id {s.id}, {s.model})" for s in unpriced)
        raise PriceUnknown(f"limits.budget_usd = {dollars(limit)} is set, but the price of {names} is unknown, so the "
                         f"sweep's cost cannot be held to it; nothing was sent. Set price: {{input_per_mtok: …, "
                         f"output_per_mtok: …}} (USD per million tokens) on each in {params}, or remove "
                         f"limits.budget_usd")
    verdict = verdict or budget_verdict(run, est, pilot=pilot and after_pilot is None)
    if verdict is not None and verdict.outcome == "refused":
        raise refusal(run, verdict, after_pilot)


def entries(run: Run) -> dict[tuple[str, str], str]:
    """Return each stage's entry in the params file: ("collect", model id) -> "models[i]", and so on."""
    out = {("collect", m.id): f"models[{i}]" for i, m in enumerate(run.sweep.models)}
    out.update({("judge", j.id): f"judges[{i}]" for i, j in enumerate(run.sweep.judges)})
    for i, p in enumerate(run.sweep.prompts):
        if p.user_simulator is not None:
            out.setdefault(("simulator", p.user_simulator.id), f"prompts[{i}].user_simulator")
    return out
