"""One content per name in a run folder: a cell, a judge and a rubric version each stand for one digest.

Editing a prompt's template without a version bump, a model entry's params under the same id, or a rubric
under the same version is refused (exit 2) before any request; ``--supersede`` sets the earlier records aside
from every analysis (they stay in the store, the report says how many); a folder mixed by older code is
analysed on each name's latest content, with a warning. All through `bench sweep` and the fake provider.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import warnings
from pathlib import Path

import pytest
import yaml

from bench.analysis import load_run, summarize
from bench.review import ReviewSession
from bench.config.entries import PromptEntry
from bench.core.digests import LOG, MixedRunWarning
from bench.core.errors import ParamsError
from bench.core.outcome import failures
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing.grids import ROOT, grid, judge, model, prompt
from bench.testing.in_process import command, run_stages

TOPICS = 4
TEMPLATE = "One tip about {topic}."


def write(tmp_path: Path, url: str, *, template: str = TEMPLATE, params: dict | None = None,
          rubric: Path | None = None) -> Path:
    """The grid: model m1 × prompt p@v1 × TOPICS scenarios, graded by one rubric judge."""
    return grid(tmp_path / "g.yaml", url, topics=TOPICS,
                models=[model("m1", url, params=params or {"max_tokens": 32})],
                prompts=[prompt("p", template)],
                judges=[judge("grader", url, rubric=str(rubric or ROOT / "rubrics/tip-v1.md"))])


def ok(result) -> str:
    log = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, log
    return log


def refused(result, what: str, changed: str) -> str:
    """Assert a refusal (exit 2) naming ``what``, the params file, two digests, ``changed`` and both ways out."""
    err = result.stderr
    assert result.returncode == 2, result.stdout[-2000:] + err[-2000:]
    assert f"{what} would mix two contents in" in err and "g.yaml" in err, err
    assert re.search(r"record\(s\) of digest [0-9a-f]{12,}, and \S*g\.yaml now gives digest [0-9a-f]{12,}", err), err
    assert f"({changed} changed)" in err and "--supersede" in err and "bump" in err, err
    assert "Nothing was called" in err, err
    return err


def test_an_edit_under_the_same_name_is_refused_before_any_request(tmp_path, fake):
    rubric = tmp_path / "tip-v1.md"
    shutil.copy(ROOT / "rubrics/tip-v1.md", rubric)
    ok(run_stages(tmp_path, write(tmp_path, fake.url, rubric=rubric)))
    sent = fake.stats()["requests"]
    assert sent == 2 * TOPICS  # each answer asked and graded once
    records = {kind: len(RunStore(tmp_path / "runs/g").read(kind)) for kind in (Candidate, Judgment)}

    # the prompt's template, edited without bumping p's version
    err = refused(run_stages(tmp_path, write(tmp_path, fake.url, template="A short tip about {topic}.", rubric=rubric)),
                  "cell m1/p@v1", "the prompt's template")
    assert "bump the prompt's version (prompts[].version) or give the model entry a new id" in err
    # the model entry's generation params, changed under the same id
    refused(run_stages(tmp_path, write(tmp_path, fake.url, params={"max_tokens": 64}, rubric=rubric)),
            "cell m1/p@v1", "the generation params")
    # the rubric's text, edited under the same version
    rubric.write_text(rubric.read_text().replace("How well the tip fits", "How closely the tip fits"))
    err = refused(run_stages(tmp_path, write(tmp_path, fake.url, rubric=rubric)), "rubric tip-v1@1", "the rubric's text")
    assert "bump the rubric's version (its front matter)" in err
    # the judge stage alone checks its judge and rubric too
    refused(run_stages(tmp_path, write(tmp_path, fake.url, rubric=rubric), stages=("judge",)),
            "rubric tip-v1@1", "the rubric's text")

    assert fake.stats()["requests"] == sent  # no request was sent by any refused sweep
    assert {kind: len(RunStore(tmp_path / "runs/g").read(kind)) for kind in (Candidate, Judgment)} == records
    assert not (tmp_path / "runs/g" / LOG).exists()


def test_supersede_sets_the_earlier_records_aside_from_every_analysis_and_keeps_them(tmp_path, fake):
    run_dir = tmp_path / "runs/g"
    ok(run_stages(tmp_path, write(tmp_path, fake.url)))
    edited = write(tmp_path, fake.url, template="A short tip about {topic}.")
    fake.reset()
    log = ok(run_stages(tmp_path, edited, supersede=True))
    assert re.search(r"superseded: cell m1/p@v1 now stands for digest [0-9a-f]{12}; its records of digest "
                     r"[0-9a-f]{12} are set aside", log), log
    assert fake.stats()["requests"] == 2 * TOPICS  # the new answers, each graded once (never the old ones again)
    lines = (run_dir / LOG).read_text().splitlines()
    assert len(lines) == 1 and '"key": "m1/p@v1"' in lines[0]

    store = RunStore(run_dir)
    assert len(store.latest(Candidate)) == 2 * TOPICS and len(store.latest(Judgment)) == 2 * TOPICS  # both kept
    t = load_run(run_dir)
    new = {c.id for c in store.read(Candidate) if "short tip" in c.messages[-1]["content"]}
    assert set(t.candidates["id"]) == new and len(new) == TOPICS
    assert set(t.judgments["candidate"]) == new and set(t.scores["candidate"]) == new
    assert set(t.candidate_attempts["id"]) == new  # usage too: a cell's cost is its current content's
    assert t.set_aside.total == 2 * TOPICS
    assert t.set_aside.note().startswith(f"{TOPICS} answer(s) and {TOPICS} judgment(s) set aside: records of an "
                                         f"earlier content of cell m1/p@v1")
    assert summarize(run_dir, resamples=50).overview["n"].to_list() == [TOPICS]
    review = ReviewSession(run_dir, reviewer="ann")  # the panel proposes the current content's answers only
    assert {cid for it in review.items for cid in it.key} == new and len(review.judgments) == TOPICS

    again = run_stages(tmp_path, edited)  # resume: the same params, no flag, zero calls and no refusal
    assert "0 model calls" in ok(again) and fake.stats()["requests"] == 2 * TOPICS
    assert len((run_dir / LOG).read_text().splitlines()) == 1

    out = ok(command(tmp_path, "report", str(run_dir), "--out", str(tmp_path / "report.html"), "--resamples", "50"))
    html = (tmp_path / "report.html").read_text()
    assert f"{TOPICS} answer(s) and {TOPICS} judgment(s) set aside" in html, out


def test_a_supersede_the_budget_refuses_sets_nothing_aside(tmp_path, fake):
    """The supersede line is written when the run is prepared, before the budget check: a sweep refused there
    (exit 4, nothing sent) must leave every analysis on the earlier records, and the next sweep still asks."""
    run_dir = tmp_path / "runs/g"
    ok(run_stages(tmp_path, write(tmp_path, fake.url)))
    edited = yaml.safe_load(write(tmp_path, fake.url, template="A short tip about {topic}.").read_text())
    for entry in (edited["models"][0], edited["judges"][0]):
        entry["price"] = {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}
    edited["limits"]["budget_usd"] = 0.001  # the prompts alone cost more: refused before anything is sent
    (tmp_path / "g.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    fake.reset()
    stopped = run_stages(tmp_path, tmp_path / "g.yaml", supersede=True)
    assert stopped.returncode == 4 and fake.stats()["requests"] == 0, stopped.stdout[-2000:] + stopped.stderr[-2000:]
    t = load_run(run_dir)
    assert t.candidates.height == TOPICS and t.set_aside.total == 0  # the earlier content is still the cell's
    assert refused(run_stages(tmp_path, tmp_path / "g.yaml"), "cell m1/p@v1", "the prompt's template")


def test_a_failure_of_an_earlier_content_is_set_aside_not_retried(tmp_path, fake):
    run_dir = tmp_path / "runs/g"
    fake.configure(rate_500=1.0)  # every answer of the first content fails (retries: 0)
    failed = run_stages(tmp_path, write(tmp_path, fake.url))
    assert failed.returncode == 3 and failures(run_dir), failed.stdout[-2000:]
    fake.reset()
    log = ok(run_stages(tmp_path, write(tmp_path, fake.url, template="A short tip about {topic}."), supersede=True))
    assert "item(s) failed" not in log, log  # exit 0: the old cell's failed answers are set aside, not "still failed"
    assert not failures(run_dir)
    assert fake.stats()["requests"] == 2 * TOPICS


def test_a_folder_mixed_by_older_code_is_analysed_on_its_latest_content_with_a_warning(tmp_path, fake):
    run_dir = tmp_path / "runs/g"
    ok(run_stages(tmp_path, write(tmp_path, fake.url)))
    _mix_in(run_dir, "A short tip about {topic}.")  # what older code wrote after the template was edited
    with pytest.warns(MixedRunWarning, match=r"cell m1/p@v1 holds records of 2 contents \(digest [0-9a-f]{12}: "
                                             rf"{TOPICS} record\(s\), digest [0-9a-f]{{12}}: {TOPICS} record\(s\)\)"):
        t = load_run(run_dir)
    newer = {c.id for c in RunStore(run_dir).read(Candidate) if c.output == "newer"}
    assert set(t.candidates["id"]) == newer and set(t.judgments["candidate"]) == newer
    assert "mixed before bench refused it" in t.set_aside.note() and t.set_aside.total == 2 * TOPICS

    requests = fake.stats()["requests"]
    resumed = run_stages(tmp_path, write(tmp_path, fake.url, template="A short tip about {topic}."))
    assert "0 model calls" in ok(resumed) and fake.stats()["requests"] == requests  # the latest content resumes
    refused(run_stages(tmp_path, write(tmp_path, fake.url)), "cell m1/p@v1", "the prompt's template")  # not the older


def _mix_in(run_dir: Path, template: str) -> None:
    """Append, as older bench did, the records of the same cell under an edited template (ids of that content,
    created later), each judged: the cell then holds two contents and no supersede line."""
    store = RunStore(run_dir)
    new_hash = PromptEntry(id="p", version="v1", user=template).content_hash
    renamed, cands, judgments = {}, [], []
    for c in store.latest(Candidate).values():
        data = c.model_dump(exclude={"id", "created_at"})
        new = Candidate.model_validate({**data, "prompt_hash": new_hash, "output": "newer"})
        renamed[c.id] = new.id
        cands.append(new)
    for j in store.latest(Judgment).values():
        data = j.model_dump(exclude={"id", "created_at"})
        judgments.append(Judgment.model_validate({**data, "candidate_ids": [renamed[i] for i in j.candidate_ids]}))
    store.append([*cands, *judgments])


def test_open_run_refuses_in_a_notebook_and_supersedes_when_asked(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    asyncio.run(run_collect(open_run(write(tmp_path, fake.url)), progress="none"))
    sent = fake.stats()["requests"]
    edited = write(tmp_path, fake.url, params={"max_tokens": 64})
    with pytest.raises(ParamsError, match=r"(?s)cell m1/p@v1 would mix two contents .* pass --supersede \(bench sweep; "
                                          r"supersede=True in bench.open_run\)"):
        asyncio.run(run_collect(open_run(edited), progress="none"))
    assert fake.stats()["requests"] == sent
    asyncio.run(run_collect(open_run(edited, supersede=True), progress="none"))  # the notebooks' `supersede`
    assert fake.stats()["requests"] == sent + TOPICS
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixedRunWarning)  # superseded, not mixed: nothing to warn about
        t = load_run(tmp_path / "runs/g")
    assert t.candidates.height == TOPICS and t.set_aside.total == TOPICS


def test_a_dry_run_of_an_edited_template_supersedes_its_own_folder(tmp_path):
    params = write(tmp_path, "http://127.0.0.1:9")  # never reached: a dry run calls nothing
    ok(run_stages(tmp_path, params, dry_run=True))
    log = ok(run_stages(tmp_path, write(tmp_path, "http://127.0.0.1:9", template="A short tip about {topic}."),
                   dry_run=True))
    assert "superseded: cell m1/p@v1" in log
    assert load_run(tmp_path / "runs/g-dry").candidates.height == TOPICS


def test_reviews_of_an_earlier_rubric_text_count_for_nothing_after_a_supersede(tmp_path, fake):
    """A review grades an answer on one rubric text: once the rubric is edited under its version and superseded,
    the old reviews cover nothing (no count says "2 of 4 reviewed" of answers graded on the new text)."""
    run_dir = tmp_path / "runs/g"
    rubric = tmp_path / "tip-v1.md"
    shutil.copy(ROOT / "rubrics/tip-v1.md", rubric)
    ok(run_stages(tmp_path, write(tmp_path, fake.url, rubric=rubric)))
    session = ReviewSession(run_dir, reviewer="ann")
    for item in session.items[:2]:
        session.save(item.reviewable()[0].id, scores={c: 3.0 for c in ("relevance", "actionability", "tone")},
                     blind=True)
    assert session.reviewed.line().startswith(f"2 of {TOPICS} answers reviewed")
    rubric.write_text(rubric.read_text().replace("How well the tip fits", "How closely the tip fits"))
    ok(run_stages(tmp_path, write(tmp_path, fake.url, rubric=rubric), supersede=True))
    again = ReviewSession(run_dir, reviewer="ann")
    assert again.reviewed.line().startswith(f"0 of {TOPICS} answers reviewed"), again.reviewed.line()
    assert load_run(run_dir).reviews.height == 0
