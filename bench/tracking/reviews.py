"""Human reviews as MLflow assessments on their answers' traces, whose source is the reviewer; logged only for a
tracked run, each Review id once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core.records import Judgment, Review
from bench.core.store import RunStore
from bench.tracking._console import warn
from bench.tracking.mlflow_store import mlflow_module, read_state, save_state


def log_reviews(run_dir: str | Path, reviews: list[Review]) -> int:
    """Log human reviews as assessments on their answers' traces; return how many. Does nothing for a run never
    tracked; warns on failure; a Review id already logged is never logged again."""
    run_dir = Path(run_dir)
    state = read_state(run_dir)
    done = set(state.setdefault("reviewed", []))
    todo = list({r.id: r for r in reviews if r.id not in done
                 and state["traces"].get(r.candidate_ids[0] if r.candidate_ids else "")}.values())
    if not todo:
        return 0
    logged = 0
    try:
        from mlflow.entities import AssessmentSource  # noqa: PLC0415 (mlflow: 2 s, only for a tracked run)

        judges = {j.id: j.judge_id for j in RunStore(run_dir).iter(Judgment)}
        mlflow = mlflow_module(run_dir, run_dir.name)
        for r in todo:
            trace = state["traces"][r.candidate_ids[0]]
            if r.id not in _logged_review_ids(mlflow, trace):  # e.g. logged before a lost state file
                values = dict(r.scores or {}) if r.verdict is None else {"verdict": r.verdict}
                if r.score is not None:
                    values["composite"] = r.score
                for name, value in values.items():
                    mlflow.log_feedback(trace_id=trace, name=f"{judges.get(r.judgment_id, 'judge')}.{name}",
                                        value=value, source=AssessmentSource(source_type="HUMAN", source_id=r.reviewer),
                                        rationale=r.note or None,
                                        metadata={"review_id": r.id, "judgment_id": r.judgment_id,
                                                  "blind": str(r.blind).lower()})
                logged += 1
            done.add(r.id)
        return logged
    except Exception as err:
        warn("MLflow logging of reviews", err)
        return logged
    finally:
        state["reviewed"] = sorted(done)
        save_state(run_dir, state)


def _logged_review_ids(mlflow: Any, trace_id: str) -> set[str]:
    """Return the Review ids of the human assessments already on a trace."""
    trace = mlflow.get_trace(trace_id)
    assessments = (trace.info.assessments or []) if trace is not None else []
    return {str((a.metadata or {}).get("review_id")) for a in assessments if (a.metadata or {}).get("review_id")}
