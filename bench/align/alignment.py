"""What `bench align RUN --judge ID` does: align a judge to a run's blind human reviews, write the best variant as
a rubric version, print and record it. Each step refuses with exit 2 before spending."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.align.cost import align_estimate, hold_to_budget
from bench.align.crossval import CrossValidation, Setup, count_usage, cross_validate, final_text
from bench.align.folds import make_folds
from bench.align.reviews import ReviewedAnswer, reviewed_answers
from bench.align.rubric_writer import aligned_id, reference, write_rubric
from bench.align.variants import KINDS, ORIGINAL
from bench.analysis import load_run
from bench.config.align import AlignSettings
from bench.core import paths
from bench.core.errors import BenchError
from bench.core.records import content_hash
from bench.core.store import atomic_write
from bench.judge import Judge, load_judges
from bench.models.budget import dollars
from bench.models.preflight import preflight
from bench.run import Run, open_run, shown_path
from bench.stage_runs import check_contents, make_llm
from bench.tracking import shown_uri, tracking_uri
from bench.tracking.alignments import log_alignment

RECORDS = "align"  # <run>/align/<judge>-<key>.json: every alignment's document


def align(run: str, *, judge: str, k: int | None = None, params: str | None = None, dry_run: bool = False,
          resamples: int = 2000, track: bool = True) -> int:
    """Align judge ``judge`` of run folder (or sweep name) ``run`` to its reviews; print and record it; return 0."""
    folder = _folder(run)
    r = open_run(_params(params, folder), run_dir=folder)
    settings = r.sweep.align or AlignSettings()
    k = k or settings.k
    the_judge = load_judges(r, only=judge)[0]
    check_contents(r, [the_judge])  # the judge and its rubric version as the run graded with them, or refused
    tables = load_run(folder)
    answers = reviewed_answers(tables, the_judge)
    folds = make_folds([a.unit for a in answers], k, settings.seed, judge=f"judge {judge}",
                       also=_not_blind(tables, the_judge, answers))
    key = _key(r, the_judge, settings, answers, k, resamples)
    rubric_id, existing = aligned_id(the_judge.rubric, key)
    setup = Setup(make_llm(r), the_judge, settings.optimizer.spec() if settings.optimizer else None,
                  settings.max_examples, rubric_id, resamples, settings.seed)
    print(f"bench align: judge {judge} ({the_judge.entry.model}) on {the_judge.rubric.key}, run {folder.name}: "
          f"{len(answers)} answers reviewed blind, {k} folds"
          + ("" if setup.optimizer else "; no align.optimizer in the params: few-shot variants only"))
    interrupted = False
    try:
        est = align_estimate(setup, answers, folds)
        print(est.line())
        if dry_run:
            print("--dry-run: nothing was sent")
            return 0
        hold_to_budget(est, setup.llm, shown_path(r.params_path))
        preflight([the_judge.entry.spec()] + ([setup.optimizer] if setup.optimizer else []))
        cv, text = asyncio.run(_align(setup, answers, folds, lambda cv: _provenance(r, setup, cv, answers, k, key)))
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if setup.llm.cache is not None:
            setup.llm.cache.close()
        setup.llm.journal.close(keep=interrupted)  # interrupted: requests may be in flight (bench.core.journal)
    return _finish(r, setup, cv, text, existing, answers, k, key, track)


async def _align(setup: Setup, answers: list[ReviewedAnswer], folds: list, provenance: Any
                 ) -> tuple[CrossValidation, str | None]:
    """Cross-validate, then build the chosen kind over every answer (None when the rubric as it is wins)."""
    try:
        cv = await cross_validate(setup, answers, folds, {a.unit: a.judged for a in answers})
        best = cv.best()
        text = None
        if best != ORIGINAL:
            text, proposal = await final_text(setup, answers, best, provenance(cv))
            count_usage(cv.usage, proposal.usage if proposal is not None else None)
        return cv, text
    finally:
        await setup.llm.aclose()


def _finish(r: Run, setup: Setup, cv: CrossValidation, text: str | None, existing: Path | None,
            answers: list[ReviewedAnswer], k: int, key: str, track: bool) -> int:
    """Print the agreement table and the choice, write the rubric, the record and the MLflow run; return 0."""
    best, folder = cv.best(), setup.judge.rubric.path.parent
    print("held-out agreement with the reviewers (quadratic kappa pooled over criteria, 95% CI over answers):")
    print(f"  {'before (the run)':<18} {cv.before.shown():<22} answers {cv.before.answers}")
    for kind in KINDS:
        v = cv.variants.get(kind)
        if v is not None:
            shown = v.agreement.shown() if v.agreement else f"not built: {v.error}"
            print(f"  {kind:<18} {shown:<22} answers {v.agreement.answers if v.agreement else 0}")
    written = None
    if best == ORIGINAL:
        print("no variant agrees better with the reviewers on held-out answers than the rubric as it is: "
              "nothing written")
    elif existing is not None:
        written = setup.rubric_id
        print(f"chosen: {best}; already written by an earlier bench align with the same reviews and settings: "
              f"{existing}")
    else:
        write_rubric(text, folder, setup.rubric_id)
        written = setup.rubric_id
        print(f"chosen: {best} (the highest held-out kappa; ties go to the simplest); wrote "
              f"{folder / (setup.rubric_id + '.md')}: name it in a judge entry as rubric: "
              f"{reference(setup.rubric_id, folder, r.root, r.params_path)}")
    u = cv.usage
    paid = "price unknown" if u["cost_usd"] is None else f"paid {dollars(u['cost_usd'])}"
    print(f"requests: {int(u['calls'])} sent, {int(u['cache_hits'])} answered by the response cache; {paid}")
    doc = _document(r, setup, cv, answers, k, key, written)
    record = r.dir / RECORDS / f"{setup.judge.entry.id}-{key}.json"
    atomic_write(record, json.dumps(doc, indent=1, ensure_ascii=False).encode("utf-8"))
    print(f"record: {record}")
    if track:
        artifacts = [record] + ([folder / f"{written}.md"] if written else [])
        if (run_id := log_alignment(r.dir, doc, artifacts)):
            print(f"mlflow: alignment run {run_id} in {shown_uri(tracking_uri(r.dir))}")
    return 0


def _after(cv: CrossValidation) -> Any:
    best = cv.best()
    return cv.before if best == ORIGINAL else cv.variants[best].agreement


def _provenance(r: Run, setup: Setup, cv: CrossValidation, answers: list[ReviewedAnswer], k: int,
                key: str) -> dict[str, Any]:
    """Return the front matter's ``provenance`` of the version written."""
    before, after = cv.before, _after(cv)
    return {"tool": "bench align", "key": key, "source": setup.judge.rubric.key, "source_hash": setup.judge.rubric.hash,
            "run": r.dir.name, "judge": setup.judge.entry.id, "judge_model": setup.judge.entry.model,
            "variant": cv.best(), "folds": k, "seed": setup.seed, "max_examples": setup.max_examples,
            "heldout_kappa_before": [before.kappa, before.ci_low, before.ci_high],
            "heldout_kappa_after": [after.kappa, after.ci_low, after.ci_high],
            "reviewed_answers": len(answers), "reviews": sum(len(a.reviews) for a in answers),
            "optimizer": setup.optimizer.model if setup.optimizer else None,
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d")}


def _document(r: Run, setup: Setup, cv: CrossValidation, answers: list[ReviewedAnswer], k: int, key: str,
              written: str | None) -> dict[str, Any]:
    """Return the alignment's JSON document (the record in ``<run>/align/`` and the MLflow artifact)."""
    after = _after(cv)
    return {"run": r.dir.name, "judge": setup.judge.entry.id, "judge_model": setup.judge.entry.model,
            "source": setup.judge.rubric.key, "source_hash": setup.judge.rubric.hash, "key": key, "k": k,
            "settings": {"k": k, "seed": setup.seed, "max_examples": setup.max_examples, "resamples": setup.resamples,
                         "optimizer": setup.optimizer.model if setup.optimizer else None},
            "reviewed_answers": len(answers), "reviews": sorted(i for a in answers for i in a.reviews),
            "before": cv.before.as_dict(), "after": after.as_dict() if after else None, "chosen": cv.best(),
            "written": written, "variants": {kind: {"agreement": v.agreement.as_dict() if v.agreement else None,
                                                    "error": v.error, "grades": v.grades}
                                             for kind, v in cv.variants.items()},
            "folds": cv.folds, "usage": cv.usage}


def _key(r: Run, judge: Judge, settings: AlignSettings, answers: list[ReviewedAnswer], k: int, resamples: int) -> str:
    """Return the hash of everything that determines an alignment (what ``provenance.key`` holds)."""
    return content_hash({"source": judge.rubric.key, "hash": judge.rubric.hash, "run": r.dir.name,
                         "judge": [judge.entry.id, judge.entry.model, judge.entry.endpoint, judge.params],
                         "reviews": sorted(i for a in answers for i in a.reviews), "k": k, "seed": settings.seed,
                         "max_examples": settings.max_examples, "resamples": resamples,
                         "optimizer": settings.optimizer.model_dump(mode="json") if settings.optimizer else None},
                        length=12)


def _not_blind(t: Any, judge: Judge, answers: list[ReviewedAnswer]) -> str:
    """Return ``" (and N more with the judges' grades shown, which do not count)"``, or "" when there are none."""
    blind = {a.unit for a in answers}
    shown = {cands for ((cands, rubric), _who), r in (t.reviewed.latest if t.reviewed else {}).items()
             if rubric == judge.rubric.key and not r.blind and cands[0] not in blind}
    return f" (and {len(shown)} more with the judges' grades shown, which do not count)" if shown else ""


def _folder(arg: str) -> Path:
    """Return the run folder ``arg`` names: a path, else a sweep name under ``runs/``."""
    path = paths.resolve(arg)
    if not path.is_dir() and "/" not in arg and paths.run_dir(arg).is_dir():
        return paths.run_dir(arg)
    if not path.is_dir():
        raise BenchError(f"{arg}: no such run folder (give runs/<sweep> or a sweep name; `bench sweep` makes one)")
    return path


def _params(given: str | None, folder: Path) -> Path:
    """Return the params file the run was swept with: ``--params``, else ``params/<run name>.yaml``."""
    if given:
        return paths.resolve(given)
    default = paths.project_root() / "params" / f"{folder.name}.yaml"
    if not default.is_file():
        raise BenchError(f"bench align needs the params file {folder} was swept with (its judge and align: "
                         f"section): give --params FILE (there is no {default})")
    return default
