"""A Dask scheduler and worker that serve no HTTP: what ``--cluster local:N`` runs (bench.sweep.cluster.local_cluster).

Dask starts an HTTP server in every scheduler and worker even with the dashboard off (its health,
metrics and info pages: the scheduler's on port 8787, each worker's on a random port), reachable by
any process on the machine. These classes start none. Dask imports them by name, on the driver
(the scheduler) and in each worker process (``dask worker --worker-class``).
"""

from __future__ import annotations

from typing import Any

from distributed import Scheduler, Worker


class QuietScheduler(Scheduler):
    """A scheduler that serves no HTTP (Dask's would listen on 8787 even with the dashboard off)."""

    def start_http_server(self, routes: Any, dashboard_address: Any, default_port: int = 0,
                          ssl_options: Any = None) -> None:
        return None


class QuietWorker(Worker):
    """A worker that serves no HTTP (Dask's would listen on a random port with the dashboard off)."""

    def start_http_server(self, routes: Any, dashboard_address: Any, default_port: int = 0,
                          ssl_options: Any = None) -> None:
        return None
