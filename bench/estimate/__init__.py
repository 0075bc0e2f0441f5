"""What a sweep will send and cost, stage by stage, before anything is sent.

``work`` lists each stage's first-turn requests (collect per model; each simulated user; each judge with its
mode) with their messages, less what the run folder and the response cache already hold, a conversation's and
an agent loop's bounded by its turns and steps (``bounds``); ``plan`` counts them
for `bench validate` and a sweep's progress totals; ``observed`` reads earlier records' reply lengths
and repair rates; ``cost`` turns them into tokens and dollars (`bench estimate`); ``show`` prints the
table; ``verdict`` holds the expected cost to ``limits.budget_usd`` (start, pilot first, or refuse);
``pilot`` sends the first few answers per model when no reply says how long they run; ``command``
holds `bench validate`, `bench estimate` and the estimate (and budget check) a sweep runs before it starts.
"""

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
