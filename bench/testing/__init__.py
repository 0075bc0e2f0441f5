"""What the project's tests and benchmarks run against: the fake provider, the params builder and the test kit.

``bench.testing.fake_provider`` is the loopback OpenAI-compatible fake provider the project
owns (:class:`FakeProvider` starts it as a subprocess on 127.0.0.1, configures its latency and
faults, reads its counters, stops it); ``bench.testing.grids`` writes params files and rubrics on it
(defaults plus overrides, the provider's URL filled in) and runs the ``bench`` command in a test's
folder (``env``, ``bench``, ``sweep``, ``started``); ``bench.testing.records`` makes records with
plain defaults (``scenario``, ``candidate``, ``judgment``); ``bench.testing.processes`` looks at the
processes a test starts (``free_port``, ``tree``, ``listening``, ``read_line``, ``fetch_when_up``,
``stopped_at_exit``); ``dask_cluster`` and ``postgres`` start real servers on loopback; ``bench.testing.in_process``
runs a params file's stages in the test's own process (``run_stages``: what `bench sweep` runs, without its
kernels), for the tests whose subject is not the command line. Used by tests and benchmarks, never by bench
itself. It is the lowest layer and imports nothing of bench outside ``bench/testing``, except ``records``, which
builds on ``bench.core``, and ``stages``, which drives the public API (layers of their own above it).

Names load lazily, so that ``python -m bench.testing.fake_provider`` imports only the standard
library and aiohttp.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "FakeProvider": "fake_provider", "DEFAULT_CONFIG": "fake_provider",
    "params": "grids", "grid": "grids", "model": "grids", "judge": "grids", "prompt": "grids",
    "generate": "grids", "rubric": "grids", "env": "grids", "bench": "grids", "sweep": "grids", "sweep_args": "grids",
    "started": "grids", "ROOT": "grids", "hermetic": "grids",
    "run_stages": "in_process", "StagesRun": "in_process", "command": "in_process", "Finished": "in_process",
    "scenario": "records", "candidate": "records", "judgment": "records",
    "free_port": "processes", "tree": "processes", "listening": "processes", "read_line": "processes",
    "fetch_when_up": "processes", "stopped_at_exit": "processes",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.testing' has no attribute {name!r}")
    return getattr(import_module(f"bench.testing.{module}"), name)
