"""The event loop bench starts for its own coroutines (``bench smoke``, the estimate's pilot, the benchmarks):
uvloop's when installed (the ``perf`` extra), else asyncio's; in a notebook or a sweep the seam uses the kernel's."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

try:  # the `perf` extra
    import uvloop
except ImportError:  # pragma: no cover - exercised where the extra is missing
    uvloop = None  # type: ignore[assignment]

T = TypeVar("T")


def loop_kind() -> str:
    """Return which event loop ``run`` starts: "uvloop" or "asyncio"."""
    return "asyncio" if uvloop is None else "uvloop"


def new_loop() -> asyncio.AbstractEventLoop:
    """Return a new event loop of the kind ``loop_kind`` names."""
    return asyncio.new_event_loop() if uvloop is None else uvloop.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to its end on a new event loop (``new_loop``) and close the loop, as ``asyncio.run`` does."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(main)
