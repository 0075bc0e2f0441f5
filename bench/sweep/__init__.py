"""`bench sweep`: the stage notebooks executed with papermill over a params grid, then the report and MLflow.

The grid's cells are split into executions (:mod:`~bench.sweep.executions`): one for the whole grid
(default: one event loop, one cap), N side by side (``--jobs N``), or one per cell (``--per-cell``, at
most ``--jobs`` at a time). The driver (:mod:`~bench.sweep.driver`) runs the stages in order and shares
the embedded model and the model caps with every execution (:mod:`~bench.sweep.shared`);
:mod:`~bench.sweep.command` is the whole command: lock, stages, report, tracking, summary, exit code.

On a Dask cluster (``--cluster``): :mod:`~bench.sweep.cluster` connects and serves the caps,
:mod:`~bench.sweep.probe` checks every worker, :mod:`~bench.sweep.tasks` runs a stage as one task per
cell (what a worker runs: :mod:`~bench.sweep.remote`), and :mod:`~bench.sweep.progress` shows overall
and per-model progress from the shared run folder.
"""

from bench.sweep.cluster import ClusterSession, cluster_address
from bench.sweep.command import SweepRequest, render, sweep_command, track
from bench.sweep.driver import SweepResult, check_stage, run_sweep
from bench.sweep.executions import STAGES, Execution, plan_executions, print_executions
from bench.sweep.progress import ClusterProgress
from bench.sweep.tasks import run_on_cluster, run_stage_on_cluster

__all__ = ["STAGES", "ClusterProgress", "ClusterSession", "Execution", "SweepRequest", "SweepResult", "check_stage",
           "cluster_address", "plan_executions", "print_executions", "render", "run_on_cluster", "run_stage_on_cluster",
           "run_sweep", "sweep_command", "track"]
