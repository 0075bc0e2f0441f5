"""`bench status` and ``bench.status(run_dir)``: a run's state and progress, from its run folder alone, read only.

Modules: ``state``, ``counts``, ``document`` (the JSON contract, ``SCHEMA``), ``watch`` and ``command``."""

from bench.monitor.command import mark_if_crashed, run_folder, status_command
from bench.monitor.document import SCHEMA, SCHEMA_ID, Status, status, status_table
from bench.monitor.state import STATES, RunState, run_state
from bench.monitor.watch import status_line, watch

__all__ = ["SCHEMA", "SCHEMA_ID", "STATES", "RunState", "Status", "mark_if_crashed", "run_folder", "run_state",
           "status", "status_command", "status_line", "status_table", "watch"]
