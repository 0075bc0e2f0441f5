"""What a run cost: provider requests, cache hits, tokens, dollars and latency per cell and per judge.
Every attempt counts; cost is summed only where every price was known; latency excludes cache hits."""

from __future__ import annotations

import polars as pl

from bench.analysis._inputs import require

USAGE_COLS = ["calls", "cache_hits", "error", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "cached"]


def _summary(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    fresh = pl.col("latency_s").filter(~pl.col("cached").fill_null(False))
    thought = "reasoning_tokens" in frame.columns and frame["reasoning_tokens"].is_not_null().any()
    cache = "cached_tokens" in frame.columns and frame["cached_tokens"].fill_null(0).sum() > 0
    return _cache_saved(frame.group_by(by)
            .agg(pl.col("calls").fill_null(0).sum().alias("calls"),
                 pl.col("cache_hits").fill_null(0).sum().alias("cache_hits"),
                 pl.len().alias("records"), pl.col("error").is_not_null().sum().alias("failed_records"),
                 pl.col("prompt_tokens").sum().alias("prompt_tokens"),
                 pl.col("completion_tokens").sum().alias("completion_tokens"),
                 pl.col("completion_tokens").filter(pl.col("error").is_null()).mean().alias("mean_completion_tokens"),
                 *([pl.col("reasoning_tokens").sum().alias("reasoning_tokens")] if thought else []),
                 *([pl.col("cached_tokens").sum(), pl.col("cache_saved_usd").sum()] if cache else []),
                 pl.when(pl.col("cost_usd").is_null().sum() == 0).then(pl.col("cost_usd").sum()).alias("cost_usd"),
                 pl.col("cost_usd").is_null().sum().alias("unpriced_records"),
                 fresh.quantile(0.5, "linear").alias("latency_p50_s"),
                 fresh.quantile(0.95, "linear").alias("latency_p95_s"))
            .sort(by))


def _cache_saved(table: pl.DataFrame) -> pl.DataFrame:
    """Add the ``cache`` column, "cache saved $X, Y% of input", where the provider's prompt cache served some."""
    if "cached_tokens" not in table.columns:
        return table
    return table.with_columns(pl.Series("cache", [
        f"cache saved ${saved or 0:.4f}, {(cached or 0) / prompt:.0%} of input" if prompt else None
        for saved, cached, prompt in table.select("cache_saved_usd", "cached_tokens", "prompt_tokens").iter_rows()],
        dtype=pl.Utf8))


def usage_by_cell(candidates: pl.DataFrame) -> pl.DataFrame:
    """Return per (model, prompt) cell: requests, cache hits, records and failed ones, tokens, cost, latency."""
    require(candidates, ["cell", "model", "prompt", *USAGE_COLS], "usage_by_cell", "candidates")
    return _summary(candidates, ["cell", "model", "prompt"])


def usage_by_judge(judgments: pl.DataFrame) -> pl.DataFrame:
    """Return per judge: requests, cache hits, records and failed ones, tokens, cost, latency p50/p95."""
    require(judgments, ["judge", "pack_id", "schema_version", *USAGE_COLS], "usage_by_judge", "judgments")
    call = ["pack_id", "prompt_tokens", "completion_tokens", "latency_s"]
    legacy = pl.col("pack_id").is_not_null() & (pl.col("schema_version").fill_null(1) < 2)
    packed = judgments.filter(legacy).unique(subset=call, keep="first", maintain_order=True)
    return _summary(pl.concat([judgments.filter(~legacy), packed]), ["judge"])


def usage_by_simulator(simulators: pl.DataFrame) -> pl.DataFrame:
    """Return per simulated user (``user_simulator.id``): requests, cache hits, records, tokens, cost and latency
    of its turns (``RunTables.simulator_attempts``: every attempt of every conversation it took part in)."""
    require(simulators, ["simulator", *USAGE_COLS], "usage_by_simulator", "simulators")
    return _summary(simulators, ["simulator"])


SPEND_PARTS = ("answers", "user simulators", "judges")


def run_spend(candidates: pl.DataFrame, simulators: pl.DataFrame | None, judgments: pl.DataFrame) -> pl.DataFrame:
    """Return what the run paid per part and in total: requests, ``paid_usd`` (null when some price was unknown)
    and the records without a known price; the total is what ``limits.budget_usd`` holds."""
    frames = [candidates, simulators if simulators is not None else candidates.clear(), judgments]
    rows = []
    for part, frame in zip(SPEND_PARTS, frames):
        require(frame, ["calls", "paid_usd"], "run_spend", part)
        if part == SPEND_PARTS[1] and frame.height == 0:
            continue
        unpriced = int(frame.filter(pl.col("calls").fill_null(0) > 0)["paid_usd"].is_null().sum())
        rows.append((part, int(frame["calls"].fill_null(0).sum()), unpriced,
                     None if unpriced else round(float(frame["paid_usd"].fill_null(0.0).sum()), 9)))
    unpriced = sum(r[2] for r in rows)
    rows.append(("total", sum(r[1] for r in rows), unpriced,
                 None if unpriced else round(sum(r[3] for r in rows), 9)))
    return pl.DataFrame(rows, schema={"part": pl.Utf8, "calls": pl.Int64, "unpriced_records": pl.Int64,
                                      "paid_usd": pl.Float64}, orient="row")
