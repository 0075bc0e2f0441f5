"""Every provider request is accounted in the records: every mode, repair turns, failed parses, retries.

The invariant checked against the fake provider's own counter: the ``usage.calls`` of every
record ever written (every attempt, successes and failures) add up to the requests it received;
cache hits are counted apart; and `bench validate` predicts the requests of a clean sweep exactly.
"""

from __future__ import annotations

from bench.analysis import summarize
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.grids import grid, judge, model
from bench.testing.in_process import command, run_stages


def jury(url: str) -> list[dict]:
    return [judge("rubric", url), judge("packed", url, pack_size=3), judge("checker", url, rubric="tip-checklist"),
            judge("arena", url, rubric="arena-pairwise", baseline="m1/p@v1"), judge("hybrid", url, rubric="tip-hybrid")]


def params_for(tmp_path, url, name="acct", retries=1):
    prompts = [{"id": "p", "version": "v1", "user": "One tip about {topic}."},
               {"id": "q", "version": "v1", "user": "Give one tip about {topic}."}]  # two cells, different answers
    return grid(tmp_path / f"{name}.yaml", url, name=name, topics=4, models=[model("m1", url)], prompts=prompts,
                judges=jury(url), limits={"max_concurrency": 6, "timeout_s": 10, "retries": retries})


def recorded_calls(run) -> tuple[int, int]:
    store = RunStore(run)
    recs = [*store.read(Candidate), *store.read(Judgment)]
    return (sum(r.usage.calls for r in recs if r.usage is not None),
            sum(r.usage.cache_hits for r in recs if r.usage is not None))


def test_every_request_of_every_mode_is_in_the_records(tmp_path, fake):
    # answers about t1 are garbage to every judge (a parse failure, then a repair turn that fails too),
    # and a fifth of all requests get a 500 (one retry each): every kind of call a judge can make
    fake.configure(replies=[{"match": "about t1.", "content": "no grade from me"}], rate_500=0.2, seed=3)
    params = params_for(tmp_path, fake.url)
    first = run_stages(tmp_path, params)
    assert first.returncode == 3, first.stdout[-2000:] + first.stderr[-2000:]
    run = tmp_path / "runs/acct"
    calls, hits = recorded_calls(run)
    assert calls == fake.stats()["requests"]
    judgments = RunStore(run).read(Judgment)
    repaired = [j for j in judgments if j.error_kind == "parse"]
    # the reply and its repair turn, both counted (both cells' t1 answers are the same garbage, so one of
    # them shares the other's identical judge requests while in flight: hits, not requests)
    assert repaired and all(j.usage.calls + j.usage.cache_hits >= 2 for j in repaired)
    assert sum(j.usage.calls for j in repaired) >= len(repaired)
    checklists = [j for j in judgments if j.judge_id == "checker" and j.ok]
    # one request per requirement (a request identical to one in flight is shared: a hit)
    assert checklists and all(j.usage.calls + j.usage.cache_hits >= 5 for j in checklists)
    again = run_stages(tmp_path, params)  # resume: failures asked again, every new request accounted too
    assert recorded_calls(run)[0] == fake.stats()["requests"]
    s = summarize(run, resamples=10)
    tables = int(s.usage_cells["calls"].sum()) + int(s.usage_judges["calls"].sum())
    assert tables == fake.stats()["requests"], again.stdout[-2000:]


def test_cache_hits_are_counted_apart_from_requests(tmp_path, fake):
    assert run_stages(tmp_path, params_for(tmp_path, fake.url, name="a", retries=0)).returncode == 0
    sent = fake.stats()["requests"]
    calls_a, hits_a = recorded_calls(tmp_path / "runs/a")
    assert calls_a == sent
    assert run_stages(tmp_path, params_for(tmp_path, fake.url, name="b", retries=0)).returncode == 0
    assert fake.stats()["requests"] == sent  # the same grid under another name: all from the cache
    calls, hits = recorded_calls(tmp_path / "runs/b")
    assert calls == 0 and hits == calls_a + hits_a  # every reply run a needed, none of them a request


def test_validate_predicts_the_requests_of_every_stage(tmp_path, fake):
    params = params_for(tmp_path, fake.url, retries=0)
    plan = command(tmp_path, "validate", str(params))
    assert plan.returncode == 0, plan.stderr
    rows = {tuple(ln.split()[:2]): ln.split() for ln in plan.stdout.splitlines()
            if ln.startswith(("collect ", "judge ", "total "))}
    assert rows[("judge", "arena")][2:4] == ["pairwise", "8"]  # q's 4 answers vs the baseline, both orders
    assert rows[("judge", "checker")][5] == str(8 * 5)  # one request per requirement
    assert rows[("judge", "packed")][5] == str(-(-8 // 3))  # packed 3 to a call
    predicted = int(next(r for k, r in rows.items() if k[0] == "total")[5])
    assert run_stages(tmp_path, params).returncode == 0
    assert fake.stats()["requests"] == predicted
    packed = [j for j in RunStore(tmp_path / "runs/acct").read(Judgment) if j.judge_id == "packed"]
    assert len(packed) == 8 and sum(j.usage.calls for j in packed) == 3  # each packed call counted once
    again = command(tmp_path, "validate", str(params))
    total = next(ln.split() for ln in again.stdout.splitlines() if ln.startswith("total "))
    assert total[2] == total[1] and total[3:] == ["0", "0", "0"]  # everything done, nothing to send
