"""The contract every layer shares: errors, records, the run store, paths, progress and how a run ended.
``core`` imports nothing else of bench."""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "BenchError": "errors", "JudgeParseError": "errors", "LocalModelError": "errors", "ParamsError": "errors",
    "PreflightError": "errors", "ProviderError": "errors", "StoreError": "errors",
    "EXIT_BAD_INPUT": "outcome", "EXIT_CRASHED": "outcome", "EXIT_FAILED_ITEMS": "outcome",
    "EXIT_INTERRUPTED": "outcome", "EXIT_OK": "outcome",
    "SCHEMA_VERSION": "records", "Candidate": "records", "Judgment": "records", "Record": "records",
    "Review": "records", "Scenario": "records", "Usage": "records",
    "redact": "secrets", "StageResult": "stage_result", "RunStore": "store", "atomic_write": "store",
    "Halt": "writer", "RecordWriter": "writer",
}


def __getattr__(name: str) -> Any:
    """Import what ``name`` needs on first use, so that ``bench.core.errors`` alone stays cheap to import."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'bench.core' has no attribute {name!r}")
    return getattr(import_module(f"bench.core.{_EXPORTS[name]}"), name)


__all__ = [
    "EXIT_BAD_INPUT", "EXIT_CRASHED", "EXIT_FAILED_ITEMS", "EXIT_INTERRUPTED", "EXIT_OK", "SCHEMA_VERSION",
    "BenchError", "Candidate", "Halt", "JudgeParseError", "Judgment", "LocalModelError", "ParamsError",
    "PreflightError", "ProviderError", "Record", "RecordWriter", "Review", "RunStore", "Scenario", "StageResult",
    "StoreError", "Usage", "atomic_write", "redact",
]
