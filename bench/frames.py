"""Records as pandas DataFrames, for looking at a run in a notebook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .records import Candidate
from .store import RunStore


def candidates(run_dir: str | Path, width: int = 120) -> Any:
    """Return one row per candidate id (latest record): cell, scenario, sample, output or error, usage."""
    import pandas as pd  # noqa: PLC0415

    rows = []
    for c in RunStore(run_dir).latest(Candidate).values():
        u = c.usage
        rows.append({"model": c.model_id, "prompt": f"{c.prompt_id}@{c.prompt_version}", "scenario": c.scenario_id,
                     "sample": c.sample, "output": _clip(c.output, width), "error": _clip(c.error, width),
                     "tokens": None if u is None else u.completion_tokens,
                     "latency_s": None if u is None else u.latency_s, "cached": None if u is None else u.cached,
                     "id": c.id})
    return pd.DataFrame(rows)


def cell_counts(run_dir: str | Path) -> Any:
    """Return per (model, prompt) cell: candidates done, failed, and mean output tokens."""
    df = candidates(run_dir)
    if df.empty:
        return df
    df["ok"] = df["error"].isna()
    return (df.groupby(["model", "prompt"])
              .agg(done=("ok", "sum"), failed=("ok", lambda s: int((~s).sum())), mean_tokens=("tokens", "mean"))
              .reset_index())


def _clip(text: str | None, width: int) -> str | None:
    if text is None:
        return None
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"
