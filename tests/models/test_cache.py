"""A damaged response cache is set aside, never fatal; the cache path is an option."""

from __future__ import annotations

import random
import sqlite3

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.grids import grid, judge, sweep


def test_a_damaged_cache_is_moved_aside_and_the_sweep_goes_on(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url, topics=24, judges=[judge("grader", fake.url)])
    assert sweep(tmp_path, params).returncode == 0
    cache = tmp_path / "runs/.cache/responses.sqlite"
    with sqlite3.connect(cache) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(cache.read_bytes())
    assert len(data) > 3 * 4096
    rng = random.Random(7)
    for i in range(4096, len(data) - 4096, 997):  # random bytes through the middle of the file
        data[i] = rng.randrange(256)
    cache.write_bytes(bytes(data))
    renamed = grid(tmp_path / "h.yaml", fake.url, name="h", topics=24, judges=[judge("grader", fake.url)])
    out = sweep(tmp_path, renamed)  # the same grid under another name: it would all come from the cache
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    aside = list(cache.parent.glob("responses.sqlite.damaged-*"))
    assert len(aside) == 1 and f"response cache {cache} is damaged" in out.stdout + out.stderr
    assert str(aside[0]) in out.stdout + out.stderr
    store = RunStore(tmp_path / "runs/h")
    assert all(r.ok for r in [*store.read(Candidate), *store.read(Judgment)])  # no "internal" failures
    assert len(store.done_ids(Candidate)) == 24 and len(store.done_ids(Judgment)) == 24


def test_the_cache_path_is_an_option(tmp_path, fake):
    elsewhere = tmp_path / "elsewhere" / "cache.sqlite"
    assert sweep(tmp_path, grid(tmp_path / "g.yaml", fake.url), BENCH_CACHE=str(elsewhere)).returncode == 0
    assert elsewhere.exists() and not (tmp_path / "runs/.cache/responses.sqlite").exists()
    with sqlite3.connect(elsewhere) as db:
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 4
