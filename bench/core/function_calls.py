"""Calls a researcher's check function in a worker process (one spawned pool per params folder), so that a call
past its time limit is ended by terminating the pool, and an exception comes back as its last line."""

from __future__ import annotations

import atexit
import multiprocessing
import sys
import threading
import traceback
from importlib import import_module, reload
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Any

_POOLS: dict[str, Pool] = {}
_LOCK = threading.Lock()
_SOURCES: dict[str, str | None] = {}  # in a worker: the source hash of each module it imported


def _start(folder: str) -> None:
    if folder:
        sys.path.insert(0, folder)


def _call(function: str, args: tuple, source: str | None = None) -> tuple[str, Any]:
    try:
        module, attr = function.split(":")
        fn: Any = import_module(module)
        if _SOURCES.setdefault(module, source) != source:  # the module was edited since it was imported here
            fn, _SOURCES[module] = reload(fn), source
        for part in attr.split("."):
            fn = getattr(fn, part)
        value = fn(*args)
        if isinstance(value, dict):
            value = {k: value.get(k) for k in ("score", "explanation") if k in value}
            value["explanation"] = None if value.get("explanation") is None else str(value["explanation"])
        return "ok", value if isinstance(value, (bool, int, float, dict)) else repr(value)
    except BaseException as exc:  # noqa: BLE001 - the researcher's code: any failure is the check's
        return "error", traceback.format_exception_only(type(exc), exc)[-1].strip()


def call(function: str, folder: Path | None, args: tuple, timeout: float, source: str | None = None
         ) -> tuple[str, Any]:
    """Return ``("ok", value)``, ``("error", last line)`` or ``("timeout", None)`` of ``function(*args)``
    (``source``: its module's hash; another than the worker imported reloads it)."""
    where = str(folder or "")
    with _LOCK:
        pool = _POOLS.get(where)
        if pool is None:
            pool = _POOLS[where] = multiprocessing.get_context("spawn").Pool(1, _start, (where,))
    pending = pool.apply_async(_call, (function, args, source))
    try:
        return pending.get(timeout)
    except multiprocessing.TimeoutError:
        with _LOCK:
            if _POOLS.get(where) is pool:
                del _POOLS[where]
        pool.terminate()
        return "timeout", None
    except Exception as exc:  # noqa: BLE001 - e.g. arguments or a value that cannot be pickled
        return "error", f"{type(exc).__name__}: {exc}"


def close() -> None:
    """Stop every worker (at exit, and in tests)."""
    with _LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.terminate()


atexit.register(close)
