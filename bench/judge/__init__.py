"""The judge layer: judges (a model, a versioned rubric and a mode) grade the run's answers into Judgment
records; a reply that cannot be used is a failed Judgment with the prompt, the raw reply and the reason."""

from bench.judge.modes import GRADERS  # every mode's grader, registered by name
from bench.judge.grader import Emit, Grader, Item, Judge, Request, grade_items
from bench.judge.replies import MIRROR, extract_json, parse_verdict, rationale_of, validate_scores
from bench.judge.judgments import (JudgeResult, failed_after, items_for, judge_stage, judgment_counts,
                               load_judges, next_attempts, pending_judgments)
from bench.judge.stream import JudgeStream
from bench.judge.transcripts import transcript_text, turn_count

__all__ = [
    "GRADERS", "MIRROR", "Emit", "Grader", "Item", "Judge", "JudgeResult", "JudgeStream", "Request",
    "extract_json", "failed_after", "grade_items", "items_for", "judge_stage", "judgment_counts", "load_judges",
    "next_attempts", "parse_verdict", "pending_judgments", "rationale_of", "transcript_text", "turn_count",
    "validate_scores",
]
