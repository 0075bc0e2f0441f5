"""Checks (``bench.checks``: kind -> a PluginCheck model) and providers (``bench.providers``: name -> a Provider)
other packages add through Python entry points: installing the package registers them."""

from __future__ import annotations

import functools
import warnings
from importlib.metadata import entry_points
from typing import Any


@functools.cache
def _loaded(group: str) -> dict[str, Any]:
    out = {}
    for ep in entry_points(group=group):
        try:
            out[ep.name] = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin is named, never fatal
            warnings.warn(f"bench: the {group} plugin {ep.name!r} ({ep.value}) could not be loaded: "
                          f"{type(exc).__name__}: {exc}", stacklevel=2)
    return out


def plugin_checks() -> dict[str, Any]:
    """Return the check models plugins register, by kind (bench's own kinds are validated first: never replaced)."""
    return _loaded("bench.checks")


@functools.cache
def plugin_providers() -> tuple[Any, ...]:
    """Return the providers plugins register (instances), asked before bench's own."""
    return tuple(p() if isinstance(p, type) else p for p in _loaded("bench.providers").values())


def reload() -> None:
    """Forget the plugins found so far (a package installed while the process runs is then found)."""
    _loaded.cache_clear()
    plugin_providers.cache_clear()
