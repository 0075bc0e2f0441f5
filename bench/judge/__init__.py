"""The judge layer: judges grade the run's answers into Judgment records.

A judge is a model by role, a versioned rubric and a grading mode (:class:`Judge`). Each
mode is one module whose grader satisfies the :class:`Grader` contract (``grader.py``);
``modes.py`` maps the mode names to them (``GRADERS``). ``replies.py`` turns a judge's reply
into data (JSON, verdict labels, validated scores) or a reason it cannot; ``solutions.py`` asks a
``solve_first`` judge its own answer to each question, once, before it grades; ``images.py`` shows a judge
whose rubric says ``images: true`` each item's scenario images; ``transcripts.py`` shows a conversation's
transcript (its whole, or each assistant turn in its context for a ``per_turn`` rubric); ``stage.py`` runs
every judge of a run over its stored answers, ``stream.py`` as answers arrive. A reply that
cannot be used is stored as a failed Judgment with the prompt, the raw reply and the reason.
"""

from bench.judge.modes import GRADERS  # every mode's grader, registered by name
from bench.judge.grader import Emit, Grader, Item, Judge, Request, grade_items
from bench.judge.replies import MIRROR, extract_json, parse_verdict, rationale_of, validate_scores
from bench.judge.stage import (JudgeResult, failed_after, items_for, judge_stage, judgment_counts,
                               load_judges, next_attempts, pending_judgments)
from bench.judge.stream import JudgeStream
from bench.judge.transcripts import transcript_text, turn_count

__all__ = [
    "GRADERS", "MIRROR", "Emit", "Grader", "Item", "Judge", "JudgeResult", "JudgeStream", "Request",
    "extract_json", "failed_after", "grade_items", "items_for", "judge_stage", "judgment_counts", "load_judges",
    "next_attempts", "parse_verdict", "pending_judgments", "rationale_of", "transcript_text", "turn_count",
    "validate_scores",
]
