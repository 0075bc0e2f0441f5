"""What the project's tests and benchmarks run against: the fake provider and the params builder.

``bench.testing.fake_provider`` is the loopback OpenAI-compatible fake provider the project
owns (:class:`FakeProvider` starts it as a subprocess on 127.0.0.1, configures its latency and
faults, reads its counters, stops it); ``bench.testing.grids`` writes params files on it
(defaults plus overrides, the provider's URL filled in) and runs the ``bench`` command. Used by
tests and benchmarks, never by bench itself; it is the lowest layer and imports nothing of bench
outside ``bench/testing``.

Names load lazily, so that ``python -m bench.testing.fake_provider`` imports only the standard
library and aiohttp.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "FakeProvider": "fake_provider", "SchemaFaker": "fake_provider", "DEFAULT_CONFIG": "fake_provider",
    "params": "grids", "grid": "grids", "model": "grids", "judge": "grids", "prompt": "grids",
    "generate": "grids", "bench": "grids", "sweep": "grids", "ROOT": "grids",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.testing' has no attribute {name!r}")
    return getattr(import_module(f"bench.testing.{module}"), name)
