"""What a cluster sweep's workers are told in confidence: the lease server's token and the provider keys.

One :class:`WorkerSecrets` plugin per sweep holds them in each worker's memory (never a task or the worker's
environment); :func:`kernel_secrets` puts them in a kernel's environment. Keys go only over TLS (docs/cluster.md)."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import Any

from bench.core.secrets import KNOWN_KEY_VARS, SECRET_SUFFIXES
from bench.kernels import papermill
from bench.models.ratelimit import TOKEN_ENV

PLUGIN_PREFIX = "bench-secrets-"  # + the sweep's id: the plugin's name on every worker


def secret_names(env_names: list[str] | tuple[str, ...], declared: set[str]) -> list[str]:
    """Return the variables among ``env_names`` bench treats as secrets (bench.core.secrets, plus ``declared``)."""
    return sorted(n for n in env_names if n in KNOWN_KEY_VARS or n in declared or n.endswith(SECRET_SUFFIXES))


def declared_key_vars(run: Any) -> set[str]:
    """Return the ``api_key_env`` names of every model a run calls (``Run.endpoints``)."""
    return {e.api_key_env for e in run.endpoints() if getattr(e, "api_key_env", None)}


def provider_keys(run: Any) -> dict[str, str]:
    """Return the driver's secret variables (see :func:`secret_names`) that are set: what the workers are sent."""
    names = secret_names(tuple(os.environ), declared_key_vars(run))
    return {n: os.environ[n] for n in names if os.environ.get(n) and n != TOKEN_ENV}


class WorkerSecrets:
    """A Dask worker plugin holding a sweep's secrets in memory, duck-typed so bench imports without distributed."""

    idempotent = False

    def __init__(self, name: str, values: dict[str, str]):
        self.name = name
        self.values = dict(values)

    def setup(self, worker: Any) -> None:
        """Warm the worker: import papermill and jupyter's client in a thread now, while the driver checks the
        workers, not in its first execution. The values arrived with the plugin (over the scheduler's comm)."""
        threading.Thread(target=_warm_imports, name="bench-warm-imports", daemon=True).start()

    def teardown(self, worker: Any) -> None:
        """The sweep ended (the plugin is unregistered, or the worker closes): forget every value."""
        self.values.clear()

    def __repr__(self) -> str:
        return f"WorkerSecrets({self.name!r}, {len(self.values)} value(s))"


def _warm_imports() -> None:
    """Import an execution's modules once per worker process (the import lock makes a concurrent task wait)."""
    try:
        import jupyter_client.manager  # noqa: F401, PLC0415 (heavy: what starts an execution's kernel)

        papermill()  # what runs an execution
    except Exception:  # a worker without them: the sweep's check names what is missing
        pass


def register(client: Any, name: str, values: dict[str, str]) -> None:
    """Send ``values`` to every worker of ``client``'s cluster (and to each that joins) under plugin ``name``."""
    client.register_plugin(_plugin_class()(name, values), name=name)


def unregister(client: Any, name: str) -> None:
    """Drop the plugin from the scheduler and every worker (their values are cleared by ``teardown``)."""
    with contextlib.suppress(Exception):  # a scheduler already gone: its workers forget on their own close
        client.unregister_worker_plugin(name)


def kernel_secrets(name: str, worker: Any = None) -> dict[str, str]:
    """Return the secrets ``worker`` (default: this task's) holds for the sweep's plugin ``name`` ({} when none)."""
    try:
        if worker is None:
            from distributed import get_worker  # noqa: PLC0415 (only on a worker, already imported there)

            worker = get_worker()
        plugin = worker.plugins.get(name)
    except (ImportError, ValueError, AttributeError):
        return {}
    return dict(getattr(plugin, "values", None) or {})


@functools.cache
def _plugin_class() -> type:
    """Return WorkerSecrets as a distributed.WorkerPlugin, made on first use (bench never imports distributed)."""
    from distributed.diagnostics.plugin import WorkerPlugin  # noqa: PLC0415

    return type("_Plugin", (WorkerSecrets, WorkerPlugin), {"__module__": __name__, "__qualname__": "_Plugin"})


def __getattr__(name: str) -> Any:
    if name == "_Plugin":  # a worker unpickling the plugin finds its class here by name
        return _plugin_class()
    raise AttributeError(name)
