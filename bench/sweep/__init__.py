"""`bench sweep`: the stage notebooks executed with papermill over a params grid, then the report and MLflow.

The grid is split into executions (:mod:`~bench.sweep.executions`); the driver (:mod:`~bench.sweep.driver`) runs
the stages in order and shares the embedded model and the caps (:mod:`~bench.sweep.shared`); :mod:`~bench.sweep.command`
is the whole command, and the one module that chooses a Dask cluster's stages (bench.sweep.cluster) in place of
the local kernels.
"""

from bench.sweep.command import SweepRequest, report_command, sweep_command, track
from bench.sweep.driver import RemoteStages, SweepResult, check_stage, run_sweep
from bench.sweep.executions import STAGES, Execution, plan_executions, print_executions

__all__ = ["STAGES", "Execution", "RemoteStages", "SweepRequest", "SweepResult", "check_stage", "plan_executions",
           "print_executions", "report_command", "run_sweep", "sweep_command", "track"]
