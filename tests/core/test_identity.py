"""Record identity includes where a model is served: two endpoints of one model string are two cells."""

from __future__ import annotations

import collections

from bench.config.params import load_sweep
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.fake_provider import FakeProvider
from bench.testing.grids import grid, judge, model
from bench.testing.in_process import run_stages


def endpoints(fake) -> tuple[str, str]:
    """Two api_bases of the same loopback fake (the same weights behind two servers)."""
    return fake.url, fake.url.replace("127.0.0.1", "localhost")


def test_one_model_on_two_endpoints_gives_two_cells_each_judged(tmp_path, fake):
    with FakeProvider() as other:  # the same model string served by a second server, answering otherwise
        other.configure(replies=[{"match": "One tip", "content": "a tip from the other server"}])
        a, b = fake.url, other.url
        params = grid(tmp_path / "g.yaml", a, topics=5,
                      models=[model("vllm", a, name="qwen"), model("llamacpp", b, name="qwen")],
                      judges=[judge("grader", a)])
        out = run_stages(tmp_path, params)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        assert other.stats()["by_model"] == {"qwen": 5}
    store = RunStore(tmp_path / "runs/g")
    cands = list(store.latest(Candidate).values())
    assert len(cands) == 10 and all(c.ok for c in cands)  # 2 entries × 5 scenarios: 10 distinct ids
    assert {c.endpoint for c in cands} == {a, b}
    judgments = list(store.latest(Judgment).values())
    assert len(judgments) == 10 and len({tuple(j.candidate_ids) for j in judgments}) == 10
    assert fake.stats()["by_model"] == {"qwen": 5, "grader": 10}  # each answer asked and graded once


def test_identical_entries_are_refused_naming_both(tmp_path, fake):
    a, _ = endpoints(fake)
    params = grid(tmp_path / "g.yaml", a, models=[model("one", a, name="qwen"), model("two", a + "/", name="qwen")])
    out = run_stages(tmp_path, params)
    assert out.returncode == 2 and fake.stats()["requests"] == 0
    assert "models: entries one and two are the same model" in out.stderr and out.stderr.count("\n") == 1
    params = grid(tmp_path / "j.yaml", a, judges=[judge("j1", a, name="k"), judge("j2", a, name="k")])
    out = run_stages(tmp_path, params)
    assert out.returncode == 2 and "judges: entries j1 and j2 are the same judge" in out.stderr


def test_credentials_in_an_api_base_are_not_part_of_the_identity(tmp_path, fake):
    a, _ = endpoints(fake)
    with_user = a.replace("http://", "http://user:pass-word@")
    sweep_, _ = load_sweep(grid(tmp_path / "g.yaml", a, models=[model("m", with_user)]))
    assert sweep_.models[0].endpoint == a and "pass-word" not in sweep_.models[0].identity_key()


def test_schema_1_records_are_rekeyed_once_and_cost_no_call(tmp_path, fake):
    a, _ = endpoints(fake)
    params = grid(tmp_path / "g.yaml", a, models=[model("m1", a)], judges=[judge("grader", a)])
    assert run_stages(tmp_path, params).returncode == 0
    run = tmp_path / "runs/g"
    before = collections.Counter(Candidate.model_validate_json(ln).output
                                 for ln in (run / "candidates.jsonl").read_bytes().splitlines())
    _downgrade(run)  # what this run folder looked like before ids included the endpoint
    old_ids = {c.id for c in RunStore(run).read(Candidate)}
    requests = fake.stats()["requests"]
    again = run_stages(tmp_path, params)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert fake.stats()["requests"] == requests  # nothing asked again: every reply is in the records
    assert "re-keyed" in again.stdout and (run / ".schema1-backup/candidates.jsonl").exists()
    store = RunStore(run)
    cands = store.read(Candidate)
    assert len(cands) == 4 and not {c.id for c in cands} & old_ids and {c.endpoint for c in cands} == {a}
    assert collections.Counter(c.output for c in cands) == before
    judgments = store.read(Judgment)
    assert len(judgments) == 4 and {j.candidate_ids[0] for j in judgments} == {c.id for c in cands}


def _downgrade(run) -> None:
    """Rewrite the run's records as schema 1 wrote them: no endpoint in the ids."""
    remap: dict[str, str] = {}
    for name, cls, drop in (("candidates.jsonl", Candidate, "endpoint"), ("judgments.jsonl", Judgment,
                                                                           "judge_endpoint")):
        lines = []
        for ln in (run / name).read_bytes().splitlines():
            rec = cls.model_validate_json(ln)
            data = rec.model_dump(exclude={"id", drop, "schema_version"})
            if cls is Judgment:
                data["candidate_ids"] = [remap[c] for c in rec.candidate_ids]
            old = cls.model_validate({**data, "schema_version": 1})
            remap[rec.id] = old.id
            lines.append(old.model_dump_json(exclude={"endpoint", "judge_endpoint"}))
        (run / name).write_text("\n".join(lines) + "\n")
