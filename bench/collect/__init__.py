"""The collect layer: every cell of a run answers its scenarios into Candidate records (``work_items``: the
work; ``answers``: one answer; ``candidates``: every pending item under one cap)."""

from bench.collect.answers import answer
from bench.collect.conversation import converse, request_transcript
from bench.collect.simulator import simulator_specs, simulator_view
from bench.collect.candidates import CollectResult, answer_counts, collect_stage
from bench.collect.tool_runs import check_functions, register_tool, run_call, tool_function
from bench.collect.work_items import WorkItem, make_candidate, plan, request_messages

__all__ = ["CollectResult", "WorkItem", "answer", "answer_counts", "check_functions", "collect_stage", "converse",
           "make_candidate", "plan", "register_tool", "request_messages", "request_transcript", "run_call",
           "simulator_specs", "simulator_view", "tool_function"]
