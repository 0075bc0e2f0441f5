"""The collect layer: every cell of a run answers its scenarios into Candidate records.

Shaped like the judge layer: ``answers.py`` is one answer (a :class:`WorkItem`, its id known
before any call, asked once by :func:`answer` and made a Candidate, its failure kept as data),
as ``bench.judge.grader`` is one grade; ``stage.py`` runs every pending item of a run under one
cap (:func:`collect_stage`), as ``bench.judge.stage`` does for judges. Opening the LLM client, the
run lock and the interrupt line around a stage: ``bench.stages.run_collect``.
"""

from bench.collect.answers import WorkItem, answer, make_candidate, plan, request_messages
from bench.collect.stage import CollectResult, answer_counts, collect_stage

__all__ = ["CollectResult", "WorkItem", "answer", "answer_counts", "collect_stage", "make_candidate", "plan",
           "request_messages"]
