"""What the executions of one sweep share, served from the driver: the embedded model and the model caps.

Caps are never divided: one lease server (bench.models.ratelimit, papermill parameter ``lease_server``) serves
them, with the sweep's ``limits.budget_usd``."""

from __future__ import annotations

import os

from bench.core.errors import BenchError
from bench.models import local, ratelimit
from bench.models.budget import budget_line, dollars, sweep_budget
from bench.models.providers import ModelSpec, provider_for
from bench.run import Link, Run
from bench.sweep.executions import plan_executions

class SharedLocalServer:
    """Start the embedded model once in the driver and share it with every execution (one model loaded)."""

    def __init__(self, run: Run):
        named = {e.model for e in run.endpoints()}  # simulated users too: one embedded model serves them all
        self.models = sorted(m for m in named if provider_for(ModelSpec(m)).launches)  # the embedded model's
        self.owned = False

    def __enter__(self) -> "SharedLocalServer":
        if self.models and not os.environ.get("BENCH_LOCAL_API_BASE"):
            if len(self.models) > 1:
                raise BenchError(f"a sweep can use one local model at a time; this one names {self.models}")
            endpoint = local.ensure(self.models[0])
            os.environ["BENCH_LOCAL_API_BASE"] = endpoint.api_base
            self.owned = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.owned:
            os.environ.pop("BENCH_LOCAL_API_BASE", None)
            local.shutdown()


class SharedLimits:
    """Serve every model's caps from the driver when executions run side by side (one lease server per sweep).

    Each kernel takes a lease per request at :attr:`link`, so caps and ``rpm``/``tpm`` windows span every execution;
    ``sweep_cap`` holds ``limits.max_concurrency`` there too."""

    def __init__(self, run: Run, jobs: int, per_cell: bool):
        entries = run.endpoints()
        capped = any(e.max_concurrency or e.rpm or e.tpm for e in entries)
        several = len(plan_executions(run, "collect", jobs, per_cell)) > 1
        windows = any(e.rpm or e.tpm for e in entries)  # a window spans the collect and judge executions too
        self.run, self.budget = run, run.sweep.limits.budget_usd  # a budget spans every execution (and stage)
        self.caps = (capped and several) or windows
        # executions side by side share limits.max_concurrency through the server, never a fixed slice of it each:
        # an execution whose models still have work uses the slots another one no longer needs
        self.sweep_cap = run.sweep.limits.max_concurrency if several and jobs > 1 else None
        self.wanted = self.caps or self.budget is not None or self.sweep_cap is not None
        self.server: ratelimit.LeaseServer | None = None
        self.link = Link(lock_held=True)  # what every execution is told: the driver holds the run lock for it

    def __enter__(self) -> "SharedLimits":
        if self.wanted:
            held = sweep_budget(self.budget, self.run.dir, self.run.root)  # (budget, the run folder's spend now) or None
            self.server = ratelimit.LeaseServer(self.run.sweep.limits.rate_window_s, budget=held)
            self.link = Link(self.server.start(), self.sweep_cap, held is not None, lock_held=True)
            if self.caps:
                print("model caps: one lease server for all executions (max_concurrency, rpm, tpm hold sweep-wide)",
                      flush=True)
            if held is not None:
                print(f"budget: {dollars(held[1])} of {dollars(held[0])} spent; one lease server holds the rest for "
                      f"all executions (each paid request reserves its worst-case cost first)", flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.server is not None and self.server.purse is not None:  # what was paid, reconciled with reservations
            print(budget_line(self.server.purse.report()), flush=True)
        if self.server is not None:
            self.link = Link(lock_held=True)
            self.server.stop()
