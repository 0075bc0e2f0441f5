"""A run made by a real sweep on the fake provider whose judge misreads one anchor, reviewed blind through
`bench review export/apply`: what the `bench align` tests align.

Models m1 and m2 answer twelve scenarios each; judge "grader" (fake model "judge") grades them on a two-criterion
rubric, but misreads the anchor of quality 4: where the answer deserves a 4 it says 1 (``MISREAD``), unless its
prompt shows a human's "quality: 4" (a few-shot example) or the optimizer's rewritten anchor (``REWRITTEN``).
The model qualities keep every true grade above 1, so the reviewer (ann) gives the judge's grades back with each
1 put right to 4: the truth the judge misses. The optimizer (fake model "optimizer") is scripted with ``replies``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.testing.grids import generate, grid, judge, model, rubric
from bench.testing.in_process import command, run_stages

ANSWERS_PER_MODEL = 12
QUALITY = {"m1": 0.78, "m2": 0.62}  # true grades mostly 3-5: a natural 1 needs a 3-sigma bad item
REWRITTEN = "ALIGNED-ANCHOR: a good answer is graded 4"
MISREAD = {"judge": {"criterion": "quality", "value": 4, "as": 1, "unless": ["quality: 4", REWRITTEN]}}
OPTIMIZER_REPLY = json.dumps({"rewrites": [{"criterion": "quality", "level": 4, "text": REWRITTEN}],
                              "rationale": "the judge read 'good' as 'bad'"})
# the optimizer's system message (bench.align.optimizer.OPTIMIZER_SYSTEM) opens with these words
OPTIMIZER_MATCH = "You improve the anchors of a grading rubric"


def fake_config() -> dict[str, Any]:
    """Return the fake provider's config for this run: qualities, the misread anchor, the scripted optimizer."""
    return {"model_quality": QUALITY, "misread_anchor": MISREAD,
            "replies": [{"match": OPTIMIZER_MATCH, "content": OPTIMIZER_REPLY}]}


def aligned_params(tmp: Path, url: str, *, name: str = "aligned", k: int = 3, price: dict | None = None,
                   **extra: Any) -> Path:
    """Write the run's rubric (``tmp/rubrics/tipx.md``) and params file (``tmp/<name>.yaml``); return the params.
    ``price``: declared on the judge and the optimizer (the fake provider's models have none)."""
    (tmp / "rubrics").mkdir(exist_ok=True)
    rubric(tmp / "rubrics" / "tipx.md", "quality", "tone")
    priced = {"price": price} if price else {}
    return grid(tmp / f"{name}.yaml", url, name=name, models=[model("m1", url), model("m2", url)],
                scenarios=generate(topic=[f"topic {i}" for i in range(ANSWERS_PER_MODEL)]),
                judges=[judge("grader", url, rubric="rubrics/tipx.md", name="judge", **priced)],
                align={"optimizer": {"model": "openai/optimizer", "api_base": url, **priced}, "k": k,
                       "max_examples": 4}, **extra)


def swept(tmp: Path, params: Path) -> Path:
    """Sweep ``params`` into ``tmp/runs/<its stem>``; return the run folder."""
    out = run_stages(tmp, params)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return tmp / "runs" / params.stem


def review(tmp: Path, run: Path, reviewer: str = "ann", only: int | None = None, blind: bool = True) -> int:
    """Review the run blind (`bench review export`, no judges shown; `bench review apply`): the judge's grades with
    each misread 1 put right to 4; ``only`` the first that many answers; ``blind=False``: exported with the judges'
    grades shown (``--show-judges``). Return how many misreads were put right."""
    file = tmp / f"{run.name}-{reviewer}.json"
    out = command(tmp, "review", "export", str(run), str(file), *([] if blind else ["--show-judges"]))
    assert out.returncode == 0, out.stderr
    doc = json.loads(file.read_text())
    assert doc["blind"] == blind
    doc["reviewer"] = reviewer
    said = judge_scores(run)
    fixed = 0
    for e in doc["entries"][:only]:
        scores = dict(said[e["judgment_id"]])
        if scores["quality"] == 1:
            scores["quality"], fixed = 4, fixed + 1
        e["review"] = {"scores": scores}
    file.write_text(json.dumps(doc))
    out = command(tmp, "review", "apply", str(run), str(file))
    assert out.returncode == 0, out.stderr
    return fixed


def judge_scores(run: Path) -> dict[str, dict[str, int]]:
    """Return the judge's scores in the run by judgment id (read from the run's records, as the test's oracle)."""
    out = {}
    for line in (run / "judgments.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("scores"):
            out[rec["id"]] = rec["scores"]
    return out


def align(tmp: Path, run: Path, params: Path, *args: str):
    """Run `bench align RUN --judge grader --params PARAMS ARGS`; return the finished process."""
    return command(tmp, "align", str(run), "--judge", "grader", "--params", str(params), *args)
