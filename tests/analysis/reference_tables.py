"""The run tables built one pydantic record at a time: the reference ``load_run``'s frames are held to.

``load_run`` reads records with polars (bench.analysis.record_reader) and builds its frames column by column
(bench.analysis.row_frames); these rows are the same tables spelled record by record, as plainly as they can be.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from bench.analysis.conversation_scores import per_conversation
from bench.analysis.row_frames import simulator_of
from bench.analysis.tables import (CANDIDATE_SCHEMA, COMPOSITE, JUDGMENT_SCHEMA, SCORE_SCHEMA, SIMULATOR_SCHEMA)
from bench.core.digests import set_aside
from bench.core.records import Candidate, Judgment
from bench.core.spend import paid_cost
from bench.core.store import RunStore, latest_of


def frames(run_dir: Path) -> dict[str, pl.DataFrame]:
    """Return the frames of ``load_run`` that come from candidates and judgments, built record by record."""
    store = RunStore(run_dir)
    cands, judgs, _aside = set_aside(run_dir, store.read(Candidate), store.read(Judgment))
    latest_c, latest_j = latest_of(cands), latest_of(judgs)
    return {"candidate_attempts": rows([candidate_row(c) for c in cands], CANDIDATE_SCHEMA),
            "candidates": rows([candidate_row(c) for c in latest_c.values()], CANDIDATE_SCHEMA),
            "judgment_attempts": rows([judgment_row(j, latest_c) for j in judgs], JUDGMENT_SCHEMA),
            "judgments": rows([judgment_row(j, latest_c) for j in latest_j.values()], JUDGMENT_SCHEMA),
            "scores": rows(score_rows(latest_j.values(), latest_c), SCORE_SCHEMA),
            "simulator_attempts": rows([simulator_row(c) for c in cands if c.simulator_usage], SIMULATOR_SCHEMA)}


def rows(values: list[tuple], schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(values, schema=schema, orient="row")


def usage(rec: Any, by: str = "model") -> tuple:
    u = rec.simulator_usage if by == "simulator" else rec.usage
    if u is None:  # a schema-1 failure: it sent at least one request
        return (None, None, None, None, None, 1 if rec.error else None, 0, rec.schema_version, None, 0.0, None, None)
    return (u.prompt_tokens, u.completion_tokens, u.cost_usd, u.latency_s, u.cached, u.calls, u.cache_hits,
            rec.schema_version, u.reasoning_tokens, paid_cost(u, getattr(rec, "turns", None), by), u.cached_tokens,
            u.cache_saved_usd)


def candidate_row(c: Candidate) -> tuple:
    return (c.id, c.model_id, c.prompt_key, c.cell, c.scenario_id, c.sample, c.output,
            c.error, c.error_kind, *usage(c), list(c.flags), c.ended, c.model, c.reasoning)


def simulator_row(c: Candidate) -> tuple:
    return (simulator_of(c.turns), c.cell, c.scenario_id, c.sample, c.id, c.error, *usage(c, "simulator"))


def cell_of(cid: str, cands: dict[str, Any]) -> tuple:
    c = cands.get(cid)
    if c is None:  # a dataset's answer (``<scenario>:A``), not a candidate
        side = cid.rsplit(":", 1)[-1] if ":" in cid else None
        return (f"response_{side}" if side else None), None, None, 0
    return c.cell, c.model_id, c.prompt_key, c.sample


def judgment_row(j: Judgment, cands: dict[str, Any]) -> tuple:
    cell, model, prompt, sample = cell_of(j.candidate_ids[0], cands)
    b = j.candidate_ids[1] if len(j.candidate_ids) > 1 else None
    return (j.id, j.judge_id, j.judge_model, j.mode, j.rubric_key, j.candidate_ids[0], b, cell, model, prompt,
            cell_of(b, cands)[0] if b else None, j.scenario_id, sample, j.order, j.score, j.verdict,
            j.details.get("shown_verdict"), j.rationale, j.error, j.error_kind, j.pack_id, *usage(j), j.repeat,
            j.expected_score, j.turn)


def score_rows(judgments: Any, cands: dict[str, Any]) -> list[tuple]:
    out = []
    for j, turns in per_conversation(judgments):
        if not j.ok or j.mode == "pairwise" or j.score is None:
            continue
        cell, model, prompt, sample = cell_of(j.candidate_ids[0], cands)
        head = (j.judge_id, j.judge_model, j.rubric_key, j.mode, cell, model, prompt, j.scenario_id, sample,
                j.candidate_ids[0], j.id)
        expected = j.expected_scores or {}
        for crit, value in (j.scores or {}).items():
            out.append((*head, crit, float(value), j.repeat, expected.get(crit), turns))
        out.append((*head, COMPOSITE, float(j.score), j.repeat, j.expected_score, turns))
    return out
