"""`bench sweep`: the stage notebooks executed with papermill over a params grid, then the report and MLflow.

The grid's cells are split into executions (:mod:`~bench.sweep.executions`): one for the whole grid
(default: one event loop, one cap), N side by side (``--jobs N``), or one per cell (``--per-cell``, at
most ``--jobs`` at a time). The driver (:mod:`~bench.sweep.driver`) runs the stages in order and shares
the embedded model and the model caps with every execution (:mod:`~bench.sweep.shared`); a stage stopped
on purpose (the budget reached) is said by :mod:`~bench.sweep.halts`. :mod:`~bench.sweep.command` is the
whole command: lock, stages, report, tracking, summary, exit code.

That is the whole local path, and it reads on its own: on a Dask cluster (``--cluster``) the stages run as
tasks instead (bench.sweep.cluster), and :mod:`~bench.sweep.command` is the one module that chooses,
handing the driver a cluster's stages in place of its kernels (:class:`~bench.sweep.driver.RemoteStages`).
"""

from bench.sweep.command import SweepRequest, report_command, sweep_command, track
from bench.sweep.driver import RemoteStages, SweepResult, check_stage, run_sweep
from bench.sweep.executions import STAGES, Execution, plan_executions, print_executions

__all__ = ["STAGES", "Execution", "RemoteStages", "SweepRequest", "SweepResult", "check_stage", "plan_executions",
           "print_executions", "report_command", "run_sweep", "sweep_command", "track"]
