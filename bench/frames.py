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


def judgments(run_dir: str | Path, width: int = 100) -> Any:
    """Return one row per judgment id (latest record): judge, mode, item, scores, verdict or error."""
    import pandas as pd  # noqa: PLC0415

    from .records import Judgment  # noqa: PLC0415

    cands = RunStore(run_dir).latest(Candidate)
    rows = []
    for j in RunStore(run_dir).latest(Judgment).values():
        c = cands.get(j.candidate_ids[0])
        rows.append({"judge": j.judge_id, "mode": j.mode, "rubric": f"{j.rubric_id}@{j.rubric_version}",
                     "model": c.model_id if c else None,
                     "prompt": f"{c.prompt_id}@{c.prompt_version}" if c else None, "order": j.order,
                     "score": j.score, "verdict": j.verdict, "scores": j.scores,
                     "rationale": _clip(j.rationale, width), "error": _clip(j.error, width), "id": j.id})
    return pd.DataFrame(rows)


def judge_counts(run_dir: str | Path) -> Any:
    """Return per (judge, model, prompt): judgments, failures and the mean composite score."""
    df = judgments(run_dir)
    if df.empty:
        return df
    df["ok"] = df["error"].isna()
    return (df.groupby(["judge", "model", "prompt"], dropna=False)
              .agg(judgments=("ok", "size"), failed=("ok", lambda s: int((~s).sum())), mean_score=("score", "mean"))
              .reset_index())
