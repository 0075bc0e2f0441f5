"""A Dask scheduler and worker that serve no HTTP: what ``--cluster local:N`` runs.

Dask starts a health/metrics HTTP server in every scheduler and worker even with the dashboard off, open to
any local process; these classes start none (imported by name, ``--worker-class``)."""

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
