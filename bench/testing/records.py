"""Records for tests and benchmarks with constant defaults: a test names only what it is about
(``candidate("s3", error="HTTP 500")``), and two calls with the same arguments make records with the same id."""

from __future__ import annotations

from typing import Any

from bench.core.records import Candidate, Judgment, Scenario


def scenario(fields: dict[str, Any] | None = None, **record: Any) -> Scenario:
    """Return a scenario with these template ``fields`` (default ``{"q": 0}``) and any other field of the record."""
    return Scenario(fields={"q": 0} if fields is None else fields, **record)


def candidate(of: Scenario | str = "s0", *, model_id: str = "m", output: str | None = None,
              **record: Any) -> Candidate:
    """Return model ``model_id``'s answer (``answer to <scenario id>``) to scenario ``of``; keywords set fields."""
    scenario_id = of.id if isinstance(of, Scenario) else of
    if output is None and not record.get("error"):
        output = f"answer to {scenario_id}"
    return Candidate(**{"model_id": model_id, "model": f"openai/{model_id}", "prompt_id": "p",
                        "prompt_version": "v1", "prompt_hash": "h", "scenario_id": scenario_id, "output": output,
                        **record})


def judgment(of: Candidate | None = None, *, judge_id: str = "j", score: float | None = None,
             **record: Any) -> Judgment:
    """Return judge ``judge_id``'s rubric grade of the answer ``of`` (``score`` 4.0 by default); keywords set fields."""
    item = of or candidate()
    if score is None and not record.get("error") and record.get("mode") != "pairwise":
        score = 4.0
    return Judgment(**{"judge_id": judge_id, "judge_model": f"openai/{judge_id}", "rubric_id": "tip",
                       "rubric_version": "1", "rubric_hash": "h", "mode": "rubric", "candidate_ids": [item.id],
                       "scenario_id": item.scenario_id, "score": score, **record})
