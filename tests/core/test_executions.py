"""Provenance: every papermill execution attempt of a sweep is a line of runs/<sweep>/executions.jsonl."""

from __future__ import annotations

import socket
import warnings

from bench.core.executions import ExecutionAttempt, read_attempts, record_attempt, workers
from bench.testing.grids import grid, sweep


def test_a_local_sweep_records_each_execution_with_its_worker_and_host(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url, name="prov", topics=2,
                  models=[{"id": "m1", "model": "openai/m1", "api_base": fake.url},
                          {"id": "m2", "model": "openai/m2", "api_base": fake.url}])
    out = sweep(tmp_path, params, "--jobs", "2")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = read_attempts(tmp_path / "runs" / "prov")
    assert sorted(a["name"] for a in lines) == ["collect.job1", "collect.job2"]
    assert sorted(c for a in lines for c in a["cells"]) == ["m1/p@v1", "m2/p@v1"]
    for a in lines:
        assert a["stage"] == "collect" and a["status"] == "ok" and a["attempt"] == 1
        assert a["hostname"] == socket.gethostname() and a["worker"].startswith("local:")
        assert a["cell"] == a["cells"][0] and a["started"] <= a["ended"]
    assert len(workers(tmp_path / "runs" / "prov")) == 1  # one driver process: one worker
    out = sweep(tmp_path, params, "--per-cell")  # a re-run appends its own attempts (nothing to do, still ran)
    assert len(read_attempts(tmp_path / "runs" / "prov")) == 4


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
