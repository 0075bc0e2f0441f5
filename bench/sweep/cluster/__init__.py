"""`bench sweep --cluster`: the stages of a sweep as Dask tasks, one per grid cell, on a cluster's workers.

Everything a Dask cluster adds to the local sweep, which never imports it: ``session`` connects (or starts
``local:N``) and serves the caps, ``probe`` checks every worker, ``worker_secrets`` hands them the token and keys,
``tasks`` runs a stage as tasks (``remote`` on the worker), ``progress`` shows progress from the shared run folder.
"""

from bench.sweep.cluster.progress import ClusterProgress
from bench.sweep.cluster.session import ClusterLost, ClusterSession, cluster_address
from bench.sweep.cluster.tasks import ClusterStages, report_on_cluster, run_on_cluster, run_stage_on_cluster

__all__ = ["ClusterLost", "ClusterProgress", "ClusterSession", "ClusterStages", "cluster_address",
           "report_on_cluster", "run_on_cluster", "run_stage_on_cluster"]
