"""Records as pandas DataFrames, for looking at a run in a notebook.

A run with nothing in it yet gives empty frames that keep their columns (in a notebook: the
table's header with no rows, rather than a frame without columns).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core.records import Candidate, Scenario
from bench.config.scenarios import describe
from bench.core.store import RunStore

CANDIDATE_COLUMNS = ["model", "prompt", "scenario", "sample", "output", "error", "tokens", "latency_s", "cached",
                     "scenario_id", "id"]
JUDGMENT_COLUMNS = ["judge", "mode", "rubric", "model", "prompt", "scenario", "order", "score", "verdict", "scores",
                    "rationale", "error", "id"]


def candidates(run_dir: str | Path, width: int = 120) -> Any:
    """Return one row per candidate id (latest record): cell, scenario, sample, output or error, usage."""
    import pandas as pd  # noqa: PLC0415

    rows = []
    texts = _scenario_texts(run_dir)
    for c in RunStore(run_dir).latest(Candidate).values():
        u = c.usage
        rows.append({"model": c.model_id, "prompt": f"{c.prompt_id}@{c.prompt_version}",
                     "scenario": texts.get(c.scenario_id, c.scenario_id), "scenario_id": c.scenario_id,
                     "sample": c.sample, "output": _clip(c.output, width), "error": _clip(c.error, width),
                     "tokens": None if u is None else u.completion_tokens,
                     "latency_s": None if u is None else u.latency_s, "cached": None if u is None else u.cached,
                     "id": c.id})
    return pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)


def cell_counts(run_dir: str | Path) -> Any:
    """Return per (model, prompt) cell: candidates done, failed, and mean output tokens."""
    df = candidates(run_dir)
    if df.empty:
        return df.reindex(columns=["model", "prompt", "done", "failed", "mean_tokens"])
    df["ok"] = df["error"].isna()
    return (df.groupby(["model", "prompt"])
              .agg(done=("ok", "sum"), failed=("ok", lambda s: int((~s).sum())), mean_tokens=("tokens", "mean"))
              .reset_index())


def _scenario_texts(run_dir: str | Path, width: int = 80) -> dict[str, str]:
    """Return each scenario's fields as one line, by scenario id (ids alone say nothing to a reader)."""
    return {s.id: describe(s.fields, width) for s in RunStore(run_dir).read(Scenario)}


def _clip(text: str | None, width: int) -> str | None:
    if text is None:
        return None
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def judgments(run_dir: str | Path, width: int = 100) -> Any:
    """Return one row per judgment id (latest record): judge, mode, item, scores, verdict or error."""
    import pandas as pd  # noqa: PLC0415

    from bench.core.records import Judgment  # noqa: PLC0415

    cands = RunStore(run_dir).latest(Candidate)
    texts = _scenario_texts(run_dir)
    rows = []
    for j in RunStore(run_dir).latest(Judgment).values():
        c = cands.get(j.candidate_ids[0])
        rows.append({"judge": j.judge_id, "mode": j.mode, "rubric": f"{j.rubric_id}@{j.rubric_version}",
                     "model": c.model_id if c else None,
                     "prompt": f"{c.prompt_id}@{c.prompt_version}" if c else None,
                     "scenario": texts.get(j.scenario_id, j.scenario_id), "order": j.order,
                     "score": j.score, "verdict": j.verdict, "scores": j.scores,
                     "rationale": _clip(j.rationale, width), "error": _clip(j.error, width), "id": j.id})
    return pd.DataFrame(rows, columns=JUDGMENT_COLUMNS)


def judge_counts(run_dir: str | Path) -> Any:
    """Return per (judge, model, prompt): judgments, failures and the mean composite score."""
    df = judgments(run_dir)
    if df.empty:
        return df.reindex(columns=["judge", "model", "prompt", "judgments", "failed", "mean_score"])
    df["ok"] = df["error"].isna()
    return (df.groupby(["judge", "model", "prompt"], dropna=False)
              .agg(judgments=("ok", "size"), failed=("ok", lambda s: int((~s).sum())), mean_score=("score", "mean"))
              .reset_index())
