"""What a sweep will send and cost, stage by stage, before anything is sent: ``work`` lists the requests, ``plan``
counts them, ``cost`` prices them, ``verdict`` holds them to the budget, ``pilot`` measures reply lengths."""

from bench.estimate.command import before_sweep, check_budget, estimate_command, validate
from bench.estimate.cost import Estimate, StageEstimate, estimate
from bench.estimate.plan import StagePlan, plan_requests, plan_table, planned_per_model, planned_progress
from bench.estimate.show import estimate_table
from bench.estimate.verdict import Verdict, budget_verdict
from bench.estimate.work import StageWork, stage_work

__all__ = [
    "Estimate",
    "StageEstimate",
    "StagePlan",
    "StageWork",
    "Verdict",
    "budget_verdict",
    "before_sweep",
    "check_budget",
    "estimate",
    "estimate_command",
    "estimate_table",
    "plan_requests",
    "plan_table",
    "planned_per_model",
    "planned_progress",
    "stage_work",
    "validate",
]
