"""`bench sweep --cluster`: the stages of a sweep as Dask tasks, one per grid cell, on a cluster's workers.

The local sweep (bench.sweep) runs the stages in kernels on this machine; this package is everything a
Dask cluster adds, and the local path never imports it (bench.sweep.command alone chooses between them).
:mod:`~bench.sweep.cluster.session` connects (or starts ``local:N``: :mod:`~bench.sweep.cluster.local_cluster`,
:mod:`~bench.sweep.cluster.quiet_dask`) and serves the caps; :mod:`~bench.sweep.cluster.probe` checks every
worker; :mod:`~bench.sweep.cluster.worker_secrets` hands them the token and the keys in confidence;
:mod:`~bench.sweep.cluster.tasks` runs a stage as one task per group of cells, a group per slot (what a worker runs:
:mod:`~bench.sweep.cluster.remote`) and :mod:`~bench.sweep.cluster.progress` shows overall and per-model
progress from the shared run folder.
"""

from bench.sweep.cluster.progress import ClusterProgress
from bench.sweep.cluster.session import ClusterLost, ClusterSession, cluster_address
from bench.sweep.cluster.tasks import ClusterStages, report_on_cluster, run_on_cluster, run_stage_on_cluster

__all__ = ["ClusterLost", "ClusterProgress", "ClusterSession", "ClusterStages", "cluster_address",
           "report_on_cluster", "run_on_cluster", "run_stage_on_cluster"]
