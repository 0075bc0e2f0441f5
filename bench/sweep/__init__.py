"""`bench sweep`: the stage notebooks executed with papermill over a params grid, then the report and MLflow.

:mod:`~bench.sweep.executions` splits the grid, :mod:`~bench.sweep.driver` runs the stages in order,
:mod:`~bench.sweep.shared` shares the caps, :mod:`~bench.sweep.command` is the whole command (and the one
module that chooses a Dask cluster, bench.sweep.cluster)."""

from bench.sweep.command import SweepRequest, report_command, sweep_command, track
from bench.sweep.driver import RemoteStages, SweepResult, check_stage, run_sweep
from bench.sweep.executions import STAGES, Execution, plan_executions, print_executions

__all__ = ["STAGES", "Execution", "RemoteStages", "SweepRequest", "SweepResult", "check_stage", "plan_executions",
           "print_executions", "report_command", "run_sweep", "sweep_command", "track"]
