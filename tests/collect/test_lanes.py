"""One execution works on every model at once: each endpoint has its own lane (bench.collect.candidates.lanes).

Before, the items of an execution were one queue in cell order: a model with a small cap took every worker while
its items lasted (they waited on its cap), so the next model's cells started only when it was nearly done. The
fake provider answers each request after a fixed latency; the order in which answers arrive shows whether the
models ran side by side.
"""

from __future__ import annotations

from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.testing.grids import generate, model, prompt
from tests.collect.dialogues import collect, use_runs, write


def test_a_small_capped_model_does_not_hold_back_the_others_in_one_execution(tmp_path, fake, monkeypatch):
    use_runs(monkeypatch, tmp_path / "runs")
    fake.configure(latency_ms=40)
    params = write(tmp_path / "lanes.yaml", fake.url,
                   models=[model("slow", fake.url, name="fake-slow", max_concurrency=1),
                           model("wide", fake.url, name="fake-wide", max_concurrency=3)],
                   prompts=[prompt("p", "Task {i}: one tip.")], scenarios=generate(i=list(range(30))),
                   limits={"max_concurrency": 4, "timeout_s": 20, "retries": 1})
    run = collect(params)
    answers = sorted((c for c in RunStore(run.dir).latest(Candidate).values() if c.ok), key=lambda c: c.created_at)
    assert len(answers) == 60
    order = [c.model_id for c in answers]
    # the wide model (30 answers at 3 at a time) is done while the slow one (30, one at a time) has most to go
    last_wide = max(i for i, m in enumerate(order) if m == "wide")
    assert order[: last_wide + 1].count("slow") < 20, order
    stats = fake.stats()
    assert stats["peak_in_flight_by_model"] == {"fake-slow": 1, "fake-wide": 3}  # each at its cap, never over it
    assert stats["peak_in_flight"] == 4  # both at once, within limits.max_concurrency


def test_models_without_caps_share_the_process_cap(tmp_path, fake, monkeypatch):
    use_runs(monkeypatch, tmp_path / "runs")
    fake.configure(latency_ms=30)
    params = write(tmp_path / "open.yaml", fake.url,
                   models=[model("a", fake.url, name="fake-a"), model("b", fake.url, name="fake-b")],
                   prompts=[prompt("p", "Task {i}: one tip.")], scenarios=generate(i=list(range(12))),
                   limits={"max_concurrency": 5, "timeout_s": 20, "retries": 1})
    run = collect(params)
    assert sum(c.ok for c in RunStore(run.dir).latest(Candidate).values()) == 24
    assert fake.stats()["peak_in_flight"] == 5  # two lanes of 10 workers each, under one cap of 5
