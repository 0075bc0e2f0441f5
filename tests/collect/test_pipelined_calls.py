"""A pipelined sweep's summary counts every request it sent: the collect line's "model calls" stopped counting when
the last answer came, while the judges still graded the answers left (144 printed for 160 the provider got)."""

from __future__ import annotations

import asyncio

from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing.grids import grid, judge, model, prompt


def test_the_pipelined_summary_counts_every_request_sent(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache.sqlite"))
    url = fake.url
    params = grid(tmp_path / "p.yaml", url, name="p", topics=8, models=[model("m1", url)],
                  prompts=[prompt("p", "One tip about {topic}.")], judges=[judge("j1", url), judge("j2", url)],
                  limits={"max_concurrency": 2, "timeout_s": 10, "retries": 0})
    result = asyncio.run(run_collect(open_run(params), judge=True, progress="none"))
    sent = fake.stats()["requests"]
    assert sent == 8 + 2 * 8
    assert result.calls == sent, str(result)
    assert f"{sent} model calls (answers and their grades)" in str(result)
