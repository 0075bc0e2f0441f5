"""The contract every layer shares: errors, records, the run store, paths, progress and how a run ended.

``core`` imports nothing else of bench. A run folder holds append-only JSONL records
(:mod:`~bench.core.records`, written by :class:`~bench.core.store.RunStore` through a
:class:`~bench.core.writer.RecordWriter`); what a full disk refuses goes to rescue files
(:mod:`~bench.core.rescue`), what was on the wire when a run stopped is journalled
(:mod:`~bench.core.journal`), one sweep at a time holds a run folder (:mod:`~bench.core.runlock`),
and secrets are redacted from everything written (:mod:`~bench.core.secrets`).
"""

from bench.core.errors import (BenchError, JudgeParseError, LocalModelError, ParamsError, PreflightError,
                               ProviderError, StoreError)
from bench.core.outcome import EXIT_BAD_INPUT, EXIT_CRASHED, EXIT_FAILED_ITEMS, EXIT_INTERRUPTED, EXIT_OK
from bench.core.records import SCHEMA_VERSION, Candidate, Judgment, Record, Review, Scenario, Usage
from bench.core.secrets import redact
from bench.core.stage import StageResult
from bench.core.store import RunStore, atomic_write
from bench.core.writer import Halt, RecordWriter

__all__ = [
    "EXIT_BAD_INPUT", "EXIT_CRASHED", "EXIT_FAILED_ITEMS", "EXIT_INTERRUPTED", "EXIT_OK", "SCHEMA_VERSION",
    "BenchError", "Candidate", "Halt", "JudgeParseError", "Judgment", "LocalModelError", "ParamsError",
    "PreflightError", "ProviderError", "Record", "RecordWriter", "Review", "RunStore", "Scenario", "StageResult",
    "StoreError",
    "Usage", "atomic_write", "redact",
]
