"""`bench status` and ``bench.status(run_dir)``: a run's state and progress, from its run folder alone, read only.

``state`` (running, finished, failed, interrupted or crashed, and why), ``counts`` (per stage and per model or
judge: planned, done, failed, in flight; the rate over the last minute), ``document`` (the JSON document,
a contract with its ``SCHEMA``, and its table), ``watch`` (``--watch``), ``command`` (the CLI).
"""

from bench.monitor.command import mark_if_crashed, run_folder, status_command
from bench.monitor.document import SCHEMA, SCHEMA_ID, Status, status, status_table
from bench.monitor.state import STATES, RunState, run_state
from bench.monitor.watch import status_line, watch

__all__ = ["SCHEMA", "SCHEMA_ID", "STATES", "RunState", "Status", "mark_if_crashed", "run_folder", "run_state",
           "status", "status_command", "status_line", "status_table", "watch"]
