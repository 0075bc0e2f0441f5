"""How far a run's judges can be trusted: `bench judges RUN [--json]`.

- `judges_document` (:mod:`~bench.judges.document`): per judge, its agreement with the human reviews, its
  confusion matrices, its bias by human grade and its bias audit, and the reviewers' own agreement, as one JSON
  document (the statistics are ``judge_agreement`` and ``judge_audit``, as ``from bench.analysis import
  judge_agreement, judge_audit`` gives them);
- `judges_text` (:mod:`~bench.judges.text`): the document as the tables the command prints;
- `judges_command` (:mod:`~bench.judges.command`): the command.

Only the command is cheap to import: the rest loads polars and is imported on first use (``bench.cli`` stays
light); `judged_run` reads a run folder that has judgments, or says what it lacks.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {"judges_command": "bench.judges.command", "judges_document": "bench.judges.document",
         "judged_run": "bench.judges.document", "judges_text": "bench.judges.text"}

__all__ = ["judged_run", "judges_command", "judges_document", "judges_text"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.judges' has no attribute {name!r}")
    return getattr(import_module(module), name)
