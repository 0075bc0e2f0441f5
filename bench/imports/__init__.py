"""`bench import verdicts|inspect`: grades made by other tools, written as bench's own records (docs/judges.md);
the importers (pydantic records) load lazily, when they run."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {"import_verdicts": "bench.imports.verdicts", "import_inspect": "bench.imports.inspect_log",
         "value_to_float": "bench.imports.inspect_log", "ImportProblems": "bench.imports.writing",
         "import_command": "bench.imports.command"}

__all__ = ["ImportProblems", "import_command", "import_inspect", "import_verdicts", "value_to_float"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.imports' has no attribute {name!r}")
    return getattr(import_module(module), name)
