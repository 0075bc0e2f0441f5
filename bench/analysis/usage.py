"""What a run cost: calls, tokens, dollars and latency (p50/p95) per cell and per judge.

Cost is summed only where every call's price was known; otherwise the row says how many
calls had no price instead of presenting a partial sum as the total. Latency percentiles
are over answers that were not served from the response cache (a cache hit keeps the
original call's usage, so tokens and cost stay those of the original call).
"""

from __future__ import annotations

import polars as pl


def _summary(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    fresh = pl.col("latency_s").filter(~pl.col("cached").fill_null(False))
    return (frame.group_by(by)
            .agg(pl.len().alias("calls"), pl.col("error").is_not_null().mean().alias("failure_rate"),
                 pl.col("cached").fill_null(False).mean().alias("cached"),
                 pl.col("prompt_tokens").sum().alias("prompt_tokens"),
                 pl.col("completion_tokens").sum().alias("completion_tokens"),
                 pl.col("completion_tokens").mean().alias("mean_completion_tokens"),
                 pl.when(pl.col("cost_usd").is_null().sum() == 0).then(pl.col("cost_usd").sum()).alias("cost_usd"),
                 pl.col("cost_usd").is_null().sum().alias("unpriced_calls"),
                 fresh.quantile(0.5, "linear").alias("latency_p50_s"),
                 fresh.quantile(0.95, "linear").alias("latency_p95_s"))
            .sort(by))


def usage_by_cell(candidates: pl.DataFrame) -> pl.DataFrame:
    """Return per (model, prompt) cell: calls, failure and cache rates, tokens, cost and latency p50/p95."""
    return _summary(candidates, ["cell", "model", "prompt"])


def usage_by_judge(judgments: pl.DataFrame) -> pl.DataFrame:
    """Return per judge: calls, failure and cache rates, tokens, cost and latency p50/p95.

    Every item of a packed (batch) call carries that call's usage; it is counted once per call,
    so calls, tokens, cost and latency are those of the requests actually made.
    """
    call = ["batch_id", "prompt_tokens", "completion_tokens", "latency_s"]
    packed = judgments.filter(pl.col("batch_id").is_not_null()).unique(subset=call, keep="first", maintain_order=True)
    return _summary(pl.concat([judgments.filter(pl.col("batch_id").is_null()), packed]), ["judge"])
