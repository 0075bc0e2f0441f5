"""The collect layer: every cell of a run answers its scenarios into Candidate records.

Shaped like the judge layer: ``work_items.py`` is the work (a :class:`WorkItem`, its id known
before any call, and the Candidate it becomes), ``answers.py`` one answer (:func:`answer` asks
once; a conversation or a tool loop goes to ``conversation.py``, its tool calls run by
``tool_runs.py``, its simulated user in ``simulator.py``), its failure kept as data, as
``bench.judge.grader`` is one grade; ``candidates.py`` runs every pending item of a run under one
cap (:func:`collect_stage`), as ``bench.judge.judgments`` does for judges. Opening the LLM client, the
run lock and the interrupt line around a stage: ``bench.stage_runs.run_collect``.
"""

from bench.collect.answers import answer
from bench.collect.conversation import converse, request_transcript
from bench.collect.simulator import simulator_specs, simulator_view
from bench.collect.candidates import CollectResult, answer_counts, collect_stage
from bench.collect.tool_runs import check_functions, register_tool, run_call, tool_function
from bench.collect.work_items import WorkItem, make_candidate, plan, request_messages

__all__ = ["CollectResult", "WorkItem", "answer", "answer_counts", "check_functions", "collect_stage", "converse",
           "make_candidate", "plan", "register_tool", "request_messages", "request_transcript", "run_call",
           "simulator_specs", "simulator_view", "tool_function"]
