"""`bench status`'s rate and ETA in a sweep's first minute: the items are divided by the time the sweep has run,
not by a whole minute that has not passed yet (which made the early rate too low and the ETA too long)."""

import json
from datetime import datetime, timedelta, timezone

import pytest

from bench.core.runlock import run_lock
from bench.core.sweeps import FILE, record_plan, record_start
from bench.monitor import status


def iso(seconds_ago: float) -> str:
    return (datetime.now(timezone.utc) - timedelta(seconds=seconds_ago)).isoformat(timespec="milliseconds")


def test_the_early_rate_is_over_the_time_the_sweep_has_run(tmp_path):
    old = {"event": "start", "sweep": "before", "pid": 1, "host": "gone.example", "started": iso(3000),
           "command": "bench sweep p.yaml", "budget_usd": None, "stages": ["collect"]}
    (tmp_path / FILE).write_text(json.dumps(old) + '\n{"event": "end", "sweep": "before", "ended": "%s", '
                                 '"exit_code": 0, "state": "finished", "reason": "done"}\n' % iso(40))
    sweep = record_start(tmp_path, command="bench sweep p.yaml", budget_usd=None, stages=["collect"])
    lines = (tmp_path / FILE).read_text().splitlines()
    started = json.loads(lines[-1])
    lines[-1] = json.dumps({**started, "started": iso(10)})  # this sweep began 10 s ago
    (tmp_path / FILE).write_text("\n".join(lines) + "\n")
    record_plan(tmp_path, sweep, cells={"m/p@v1": 100}, judges={}, rubrics=[])
    answers = [(f"c{n}", iso(30 if n < 5 else 5)) for n in range(11)]  # 5 by the sweep before, 6 by this one
    (tmp_path / "candidates.jsonl").write_text("".join(json.dumps(
        {"id": i, "model_id": "m", "prompt_id": "p", "prompt_version": "v1", "created_at": at}) + "\n"
        for i, at in answers))
    with run_lock(tmp_path):
        doc = status(tmp_path).doc
    rate = doc["rate"]
    assert 10 <= rate["window_s"] < 60, rate  # the time this sweep has run, not a minute
    assert rate["per_minute"] == pytest.approx(6 * 60 / rate["window_s"], rel=0.01)  # its own 6 answers only
    assert rate["eta_s"] == pytest.approx((100 - 11) / rate["per_minute"] * 60, rel=0.01)
