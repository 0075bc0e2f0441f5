"""The judge stage in a sweep: pipelined with collect, juries, resume of failed judgments only, 02_judge."""

import collections
import subprocess
import sys
from pathlib import Path

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.grids import ROOT, env, generate, grid, judge, model, prompt
from bench.models.eventloop import run as run_loop
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing import in_process
from bench.testing.in_process import command, run_stages
from tests.repo import parameterized_copy



def jury_sweep(tmp_path, fake, retries=2, **options):
    """Write the jury grid (two models, four judges, one of each kind) and sweep it with ARGS; return (run, params)."""
    url = fake.url
    params = grid(tmp_path / "jt.yaml", url, name="jt", seed=3,
                  models=[model("m1", url, name="fake-a"), model("m2", url, name="fake-b")],
                  prompts=[prompt("p", "Persona {persona}, slot {slot}. One tip.")],
                  scenarios=generate(persona=["a", "b", "c"], slot=["x", "y"]),
                  judges=[judge("grader", url, name="judge"), judge("packed", url, name="judge", pack_size=3),
                          judge("checker", url, rubric="tip-checklist", name="judge"),
                          judge("arena", url, rubric="arena-pairwise", name="judge", baseline="m1/p@v1")],
                  limits={"max_concurrency": 8, "timeout_s": 10, "retries": retries})
    return run_stages(tmp_path, params, **options), params


def latest_judgments(tmp_path):
    return RunStore(tmp_path / "runs/jt").latest(Judgment)


def test_sweep_judges_every_candidate_with_a_jury_then_makes_no_call(tmp_path, fake):
    fake.configure(replies=[{"match": "Compare the two responses", "content": "B is better. [[B>A]]"}])
    out, _ = jury_sweep(tmp_path, fake)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    js = list(latest_judgments(tmp_path).values())
    by_judge = collections.Counter(j.judge_id for j in js)
    assert by_judge == {"grader": 12, "packed": 12, "checker": 12, "arena": 12}  # arena: 6 m2 items × 2 orders
    assert all(j.ok for j in js), [j.error for j in js if not j.ok][:3]
    assert {j.mode for j in js if j.judge_id == "packed"} == {"packed"}
    assert all(j.pack_id for j in js if j.judge_id == "packed")
    arena = [j for j in js if j.judge_id == "arena"]
    assert {j.order for j in arena} == {"AB", "BA"}
    assert {(j.order, j.verdict) for j in arena} == {("AB", "B>A"), ("BA", "A>B")}  # mapped back
    requests = fake.stats()["requests"]
    again, _ = jury_sweep(tmp_path, fake)
    assert again.returncode == 0 and fake.stats()["requests"] == requests
    assert "judge: nothing pending (every candidate was graded as it arrived)" in out.stdout  # pipelined


def test_a_resumed_judge_stage_regrades_only_failures(tmp_path, fake):
    fake.configure(replies=[{"match": "The response to grade:", "content": "down", "status": 500}])
    out, params = jury_sweep(tmp_path, fake, 0)
    assert out.returncode == 3, out.stdout[-3000:]  # ran to its end with failed items: not 0, not a crash
    failed = [j for j in latest_judgments(tmp_path).values() if not j.ok]
    # the closing summary: stage × judge × error kind → count, the first error, the exact retry command
    assert f"{len(failed)} item(s) failed:" in out.stdout
    rows = [ln.split() for ln in out.stdout.splitlines() if ln.startswith("judge ") and " server " in ln]
    assert {r[1] for r in rows} == {j.judge_id for j in failed}
    assert sum(int(r[3]) for r in rows) == len(failed) and "first error: openai/judge at" in out.stdout
    assert f"retry them (a re-run asks only failed items, each as a fresh request): bench sweep {params}" in out.stdout
    assert failed and {j.judge_id for j in failed} <= {"grader", "packed"}
    assert all(j.error_kind == "server" and j.score is None and j.prompt for j in failed)
    ok_before = {j.id for j in latest_judgments(tmp_path).values() if j.ok}
    fake.reset()
    again, _ = jury_sweep(tmp_path, fake, 0)
    assert again.returncode == 0
    assert 0 < fake.stats()["requests"] <= len(failed)  # the packed mode re-packs failed items: fewer calls
    successes = collections.Counter(j.id for j in RunStore(tmp_path / "runs/jt").read(Judgment) if j.ok)
    assert all(successes[i] == 1 for i in ok_before)  # a success is never redone
    after = latest_judgments(tmp_path)
    assert all(j.ok for j in after.values()) and ok_before <= set(after)
    assert len(RunStore(tmp_path / "runs/jt").done_ids(Candidate)) == 6 * 2


def test_judge_notebook_runs_under_nbval(tmp_path, fake):
    _out, params = jury_sweep(tmp_path, fake, 2, dry_run=True)  # writes the params file only
    with in_process.environment(tmp_path):  # collect alone: the notebook does all the judging
        run_loop(run_collect(open_run(str(params)), progress="none"))
    assert not latest_judgments(tmp_path)
    target = parameterized_copy(ROOT / "notebooks/02_judge.ipynb", tmp_path / "02_judge.ipynb",
                                params=str(params), judges=["grader"], progress="text")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                             str(target)], cwd=ROOT, env=env(tmp_path), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    assert collections.Counter(j.judge_id for j in latest_judgments(tmp_path).values())["grader"] == 12


def test_judgebench_pairs_are_judged_in_both_orders_exported_and_scored(tmp_path, fake):
    import json

    data = Path(__file__).resolve().parents[3] / "shared/data/judgebench/judgebench-gpt-4o.jsonl"
    if not data.exists():
        data = Path("/work/shared/data/judgebench/judgebench-gpt-4o.jsonl")
    pairs = data.read_text().splitlines()[:6]
    (tmp_path / "pairs.jsonl").write_text("\n".join(pairs) + "\n")
    labels = [json.loads(p)["label"] for p in pairs]
    dataset = {"path": "pairs.jsonl",
               "fields": {"question": "question", "response_A": "response_A", "response_B": "response_B"},
               "reference": {"label": "label", "source": "source", "pair_id": "pair_id", "original_id": "original_id",
                             "response_model": "response_model"}}
    params = grid(tmp_path / "jb.yaml", fake.url, name="jb", seed=None, models=None, prompts=None, limits=None,
                  scenarios={"dataset": dataset}, judges=[judge("fake-judge", fake.url, rubric="arena-pairwise",
                                                                name="judge")])
    fake.configure(replies=[{"match": "Compare the two responses", "content": "[[A>B]]"}])  # always "first"
    out = run_stages(tmp_path, params, report=True)
    assert out.returncode == 0, out.log
    assert f"report: {tmp_path / 'reports/jb/index.html'}" in out.stdout  # a judge-only run has a report too
    assert "collect" not in out.stdout.split("judge:")[0].split("\n", 1)[1]  # nothing to collect
    assert fake.stats()["requests"] == 12
    exported = tmp_path / "export.jsonl"
    assert command(tmp_path, "judgebench-export", str(tmp_path / "runs/jb"), str(exported)).returncode == 0
    scored = command(tmp_path, "judgebench-score", str(exported), "--json")
    assert scored.returncode == 0, scored.stderr[-2000:]
    result = json.loads(scored.stdout)
    # a judge that always prefers the first position says A>B, then (swapped) B>A: +1 - 1 = 0 for every pair
    assert result["pairs"] == 6 and result["overall"] == 0.0 and result["inconsistent"] == 6
    assert result["nulls"] == 0 and len(labels) == 6
    from bench.analysis import summarize  # the report's analysis sees the same position bias

    position = summarize(tmp_path / "runs/jb", resamples=50).position.row(0, named=True)
    assert (position["pairs"], position["consistency"], position["first_position_wins"]) == (6, 0.0, 1.0)
