"""How far a run's judges can be trusted: `bench judges RUN [--json]`. Only the command is cheap to import; the
rest loads polars on first use."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {"judges_command": "bench.judge_trust.command", "judges_document": "bench.judge_trust.document",
         "judged_run": "bench.judge_trust.document", "judges_text": "bench.judge_trust.text"}

__all__ = ["judged_run", "judges_command", "judges_document", "judges_text"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.judge_trust' has no attribute {name!r}")
    return getattr(import_module(module), name)
