"""Analysis of a run folder on polars: leaderboards, pairwise ratings, judge reliability, accuracy, human
agreement, bias audit, calibration and usage. ``summarize(run_dir)`` computes everything the report shows."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from bench.analysis.accuracy import judge_accuracy, label_agreement
from bench.analysis.agreement import cohen_kappa, complete_pairs, krippendorff_alpha
from bench.analysis.bootstrap import bootstrap_means, holm, percentile_interval, sign_flip_pvalues
from bench.analysis.calibrated import calibrated_leaderboard
from bench.analysis.human_agreement import (JudgeAgreement, bias_by_level, confusion, human_agreement, judge_agreement,
                                            reviewer_ceiling)
from bench.analysis.judge_audit import audit_table, judge_audit
from bench.analysis.judge_stability import item_variance, judge_stability, stability_leaderboard
from bench.analysis.leaderboard import composite, leaderboard, paired_differences
from bench.analysis.listings import candidate_listing, cell_counts, judge_counts, judgment_listing
from bench.analysis.model_family import model_family
from bench.analysis.provenance import worker_table
from bench.analysis.pairwise import battles, bradley_terry, fit_bradley_terry, position_consistency, win_matrix, win_rates
from bench.analysis.reliability import disagreements, inter_judge, judge_health, judge_vs_human, jury_alpha, packed_vs_single
from bench.analysis.style_control import battle_texts, style_battles, style_controlled_ratings
from bench.analysis.summary import Summary, examples, summarize
from bench.analysis.tables import COMPOSITE, RunTables, load_run, with_reviews
from bench.analysis.ties import ties_broken
from bench.analysis.usage import run_spend, usage_by_cell, usage_by_judge, usage_by_simulator

__all__ = [
    "COMPOSITE", "JudgeAgreement", "RunTables", "Summary", "audit_table", "battle_texts", "battles", "bias_by_level", "bootstrap_means", "bradley_terry",
    "calibrated_leaderboard", "candidate_listing", "compare_runs",
    "cell_counts", "cohen_kappa", "complete_pairs", "composite", "confusion", "disagreements", "examples", "fit_bradley_terry",
    "holm", "human_agreement", "inter_judge", "item_variance", "judge_accuracy", "judge_agreement", "judge_audit", "judge_counts", "judge_health", "judge_stability",
    "judge_vs_human", "judgment_listing", "jury_alpha",
    "krippendorff_alpha", "label_agreement", "leaderboard", "load_run", "model_family",
    "packed_vs_single", "paired_differences", "percentile_interval", "position_consistency", "reviewer_ceiling",
    "sign_flip_pvalues",
    "run_spend", "stability_leaderboard", "style_battles", "style_controlled_ratings", "summarize", "ties_broken",
    "usage_by_cell", "usage_by_judge", "usage_by_simulator", "win_matrix", "win_rates", "with_reviews", "worker_table",
]


def __getattr__(name: str) -> Any:
    if name == "compare_runs":  # two runs compared (bench.compare builds on this package: loaded on first use)
        return import_module("bench.compare.comparison").compare_runs
    raise AttributeError(f"module 'bench.analysis' has no attribute {name!r}")
