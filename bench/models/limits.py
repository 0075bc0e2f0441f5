"""One ``Limits``: the caps, timeouts and retry policy of every model call, as the params file's ``limits:``
section, validated from YAML and handed to the client: one name, one default and one check per knob."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MAX_ITEMS = 2_000_000  # answers a sweep may plan (cells × scenarios × samples); limits.max_items raises it


class Limits(BaseModel):
    """The sweep's budget: requests in flight, timeouts, retries, attempts across runs and the grid's size bound."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrency: int = Field(default=16, gt=0)  # requests in flight for the whole sweep (per process: the client)
    timeout_s: float = Field(default=60.0, gt=0)  # per attempt
    retries: int = Field(default=4, ge=0)  # extra requests for one call that hit a 429, 5xx, timeout, …
    max_attempts: int = Field(default=3, gt=0)  # tries of one item across runs: each resume asks a failure afresh
    max_items: int = Field(default=DEFAULT_MAX_ITEMS, gt=0)  # answers a sweep may plan: a typo cannot plan 10^8
    backoff_s: float = Field(default=0.5, ge=0)  # first backoff; doubles per attempt, with jitter
    backoff_max_s: float = Field(default=30.0, ge=0)
    retry_budget_s: float = Field(default=300.0, gt=0)  # never keep retrying one request longer than this
    rate_window_s: float = Field(default=60.0, gt=0)  # the window of a model's `rpm` and `tpm` caps
    max_reply_mb: float = Field(default=32.0, gt=0)  # a reply's bound, raw and decompressed (MB = 2^20 bytes)
    budget_usd: float | None = Field(default=None, gt=0)  # the run folder's spend cap (bench.models.budget)
    # under a budget, the answers per model a sweep sends first when no earlier reply says how long its replies
    # run (bench.estimate.pilot); 0: no pilot, such replies are assumed to take their whole output bound
    pilot: int = Field(default=5, ge=0, strict=True)
