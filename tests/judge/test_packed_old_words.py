"""The packed mode's words from before its rename (``mode: batch``, ``batch_size``, a judgment's ``batch_id``)
still work: a params file saying them runs the packed mode, records saying them are read in today's words and
keep their ids, so a resume in the new words grades none of them again and the analysis reads old and new
judgments together. Records written now say ``packed``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench.analysis import load_run, packed_vs_single, usage_by_judge
from bench.config.params import load_sweep
from bench.core.digests import judge_digest
from bench.core.errors import ParamsError
from bench.core.records import Judgment, content_hash
from bench.core.store import RunStore
from bench.run import open_run
from bench.stage_runs import run_collect, run_judge
from bench.testing.grids import grid, judge, model

OLD = {"mode": "batch", "batch_size": 3}
NEW = {"mode": "packed", "pack_size": 3}


def _params(path: Path, url: str, topics: int, words: dict) -> Path:
    """A packed judge in ``words`` and a single-item judge, both of model ``openai/judge``, over one model."""
    return grid(path, url, name="words", topics=topics, models=[model("m1", url)],
                judges=[judge("packer", url, name="judge", **words), judge("single", url, name="judge")])


def _run(params: Path) -> Path:
    """Collect, then judge every stored answer (a resume: judgments already in the run folder are skipped)."""
    run = open_run(params)
    asyncio.run(run_collect(run, progress="none"))
    asyncio.run(run_judge(run, progress="none"))
    return run.dir


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for path in RunStore(run_dir).files(Judgment) for line in path.read_text().splitlines()]


def _old_id(rec: dict) -> str:
    """Return a judgment's id as bench computed it before the rename: what determines it, in the old words."""
    keys = ("candidate_ids", "judge_model", "judge_params", "rubric_id", "rubric_version", "rubric_hash", "mode",
            "order")
    ident = {k: rec.get(k) for k in keys}
    ident.update({k: rec[k] for k in ("judge_endpoint", "repeat") if rec.get(k)})
    return "j" + content_hash(ident)


def _as_written_before_the_rename(run_dir: Path) -> None:
    """Rewrite the run's judgments as bench wrote them before the rename: the old words, the ids hashed from them."""
    for path in RunStore(run_dir).files(Judgment):
        out = []
        for rec in map(json.loads, path.read_text().splitlines()):
            rec["batch_id"] = rec.pop("pack_id")
            if rec["mode"] == "packed":
                rec["mode"] = "batch"
                rec["judge_params"]["batch_size"] = rec["judge_params"].pop("pack_size")
                if "pack_size" in rec["details"]:
                    rec["details"]["batch_size"] = rec["details"].pop("pack_size")
            rec["id"] = _old_id(rec)
            out.append(json.dumps(rec) + "\n")
        path.write_text("".join(out))


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    return tmp_path


def test_a_params_file_in_the_old_words_runs_the_packed_mode_and_writes_the_new_words(runs, fake):
    run_dir = _run(_params(runs / "old.yaml", fake.url, 3, OLD))
    packer = [r for r in _lines(run_dir) if r["judge_id"] == "packer"]
    assert len(packer) == 3 and all(r["error"] is None for r in packer), [r["error"] for r in packer]
    assert {r["mode"] for r in packer} == {"packed"} and len({r["pack_id"] for r in packer}) == 1
    assert all(r["judge_params"] == {"pack_size": 3} and r["details"]["pack_size"] == 3 for r in packer)
    assert not any("batch_id" in r or "batch_size" in r["judge_params"] for r in _lines(run_dir))
    assert fake.stats()["requests"] == 3 + 1 + 3  # three answers, one packed call, three single gradings


def test_records_in_the_old_words_keep_their_ids_and_are_analysed_with_new_ones(runs, fake):
    run_dir = _run(_params(runs / "old.yaml", fake.url, 3, OLD))
    _as_written_before_the_rename(run_dir)
    old = {r["id"]: r for r in _lines(run_dir) if r["judge_id"] == "packer"}
    assert {r["mode"] for r in old.values()} == {"batch"} and all(r["batch_id"] for r in old.values())
    read = RunStore(run_dir).latest(Judgment)
    assert all(read[i].mode == "packed" and read[i].pack_id == old[i]["batch_id"] for i in old)
    assert all(read[i].judge_params == {"pack_size": 3} for i in old)

    fake.reset()
    assert _run(_params(runs / "new.yaml", fake.url, 6, NEW)) == run_dir  # three more answers, in the new words
    packer = [r for r in _lines(run_dir) if r["judge_id"] == "packer"]
    assert len(packer) == 6 and set(old) < {r["id"] for r in packer}, "an old judgment was graded again"
    assert fake.stats()["requests"] == 3 + 1 + 3  # the new answers only: one packed call for the packer

    t = load_run(run_dir)
    packed = t.judgments.filter(t.judgments["judge"] == "packer")
    assert packed.height == 6 and set(packed["mode"]) == {"packed"} and packed["pack_id"].n_unique() == 2
    usage = {r["judge"]: r for r in usage_by_judge(t.judgments).iter_rows(named=True)}
    assert usage["packer"]["calls"] == 2  # the old call and the new one, each counted once
    agreement = packed_vs_single(t.scores)
    assert agreement.height and set(agreement["n"]) == {6}  # old and new packed grades beside the single ones


def test_ids_and_digests_hash_the_old_words_so_they_are_unchanged():
    base = {"judge_id": "packer", "judge_model": "openai/judge", "rubric_id": "tip", "rubric_version": "1",
            "rubric_hash": "h", "candidate_ids": ["c1"], "scenario_id": "s1"}
    new = Judgment(**base, mode="packed", judge_params={"pack_size": 3})
    assert new.id == _old_id({**base, "mode": "batch", "judge_params": {"batch_size": 3}})
    old = Judgment(**base, mode="batch", judge_params={"batch_size": 3})
    assert old.id == new.id and old.mode == "packed" and old.judge_params == {"pack_size": 3}
    assert Judgment(**base, mode="rubric").id != new.id
    assert (judge_digest("packer", "openai/judge", None, {"pack_size": 3}, "packed").value
            == judge_digest("packer", "openai/judge", None, {"batch_size": 3}, "batch").value)


def test_a_judge_giving_both_sizes_is_refused(tmp_path):
    path = grid(tmp_path / "both.yaml", "http://127.0.0.1:9", judges=[
        judge("packer", "http://127.0.0.1:9", mode="packed", pack_size=3, batch_size=4)])
    with pytest.raises(ParamsError, match="batch_size is the old name of pack_size") as err:
        load_sweep(path)
    assert "both.yaml" in str(err.value)
