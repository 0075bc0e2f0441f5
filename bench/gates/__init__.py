"""Regression gates: a run checked against floors and a baseline run, for CI (`bench gate`, a sweep's end).

- `Gates` (:mod:`~bench.gates.spec`): the ``gates:`` section of a params file, validated with it;
- `evaluate_gates` (:mod:`~bench.gates.evaluate`): each gate's value, confidence interval and verdict, as a
  `GateReport` whose ``exit_code`` is 5 (`EXIT_GATE_FAILED`) when a gate failed; the judge-human agreement
  of the run with its interval comes from :mod:`~bench.gates.agreement`;
- `gate_table` (:mod:`~bench.gates.table`): the table the terminal shows; `write_junit`
  (:mod:`~bench.gates.junit`): JUnit XML, one test case per gate, for GitHub Actions, GitLab and Jenkins;
- `gate_command` and `sweep_gates` (:mod:`~bench.gates.command`): `bench gate` and a sweep's end;
  `check_baseline` refuses a params file's missing baseline before a sweep spends anything.

The params models import `Gates` from here, so only it is imported eagerly: the rest loads polars and the
comparison of runs, and is imported on first use (``import bench.config`` stays cheap).
"""

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
