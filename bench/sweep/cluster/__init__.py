"""`bench sweep --cluster`: the stages of a sweep as Dask tasks, one per group of cells, on a cluster's workers.

``session`` connects and serves the caps, ``probe`` checks workers, ``worker_secrets`` hands them secrets,
``tasks``/``remote`` run a stage, ``progress`` reads the shared run folder. The local sweep never imports it."""

from bench.sweep.cluster.progress import ClusterProgress
from bench.sweep.cluster.session import ClusterLost, ClusterSession, cluster_address
from bench.sweep.cluster.tasks import ClusterStages, report_on_cluster, run_on_cluster, run_stage_on_cluster

__all__ = ["ClusterLost", "ClusterProgress", "ClusterSession", "ClusterStages", "cluster_address",
           "report_on_cluster", "run_on_cluster", "run_stage_on_cluster"]
