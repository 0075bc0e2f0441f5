"""Regression gates: a run checked against floors and a baseline run, for CI (`bench gate`, a sweep's end).
Only `Gates` is imported eagerly; the rest loads polars on first use."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from bench.gates.spec import GATE_KEYS, Gates, merge

_LAZY = {"evaluate_gates": "evaluate", "GateReport": "evaluate", "GateResult": "evaluate",
         "EXIT_GATE_FAILED": "evaluate", "EXIT_CANNOT_DECIDE": "evaluate",
         "gate_table": "table", "write_junit": "junit", "junit_xml": "junit",
         "gate_agreement": "agreement", "gate_command": "command", "sweep_gates": "command",
         "check_baseline": "command"}

__all__ = ["EXIT_CANNOT_DECIDE", "EXIT_GATE_FAILED", "GATE_KEYS", "GateReport", "GateResult", "Gates", "check_baseline", "evaluate_gates",
           "gate_agreement", "gate_command", "gate_table", "junit_xml", "merge", "sweep_gates", "write_junit"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.gates' has no attribute {name!r}")
    return getattr(import_module(f"bench.gates.{module}"), name)
