"""Provenance: every papermill execution attempt of a sweep is a line of runs/<sweep>/executions.jsonl. A local
`bench sweep --jobs 3` recording each execution with its worker and host: tests/sweep/test_jobs.py."""

from __future__ import annotations

import warnings

from bench.core.executions import ExecutionAttempt, read_attempts, record_attempt


def test_a_torn_line_is_skipped_and_a_failed_write_only_warns(tmp_path):
    attempt = ExecutionAttempt("judge", "judge", [], "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", "failed")
    record_attempt(tmp_path, attempt)
    with open(tmp_path / "executions.jsonl", "a") as f:
        f.write('{"stage": "coll')  # a kill mid-write
    assert [a["status"] for a in read_attempts(tmp_path)] == ["failed"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record_attempt(tmp_path / "missing-folder", attempt)
    assert any("could not record execution judge" in str(w.message) for w in caught)
