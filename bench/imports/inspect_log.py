"""`bench import inspect LOG`: an Inspect AI eval log (JSON) as bench records: each sample a scenario, its output a
candidate of cell ``<model>/<task>@<task_version>``, each scorer's value an ``automated`` judgment valued as Inspect's
``value_to_float`` does, so per-scorer means are the log's accuracy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.core.records import Candidate, Judgment, Record, Scenario, Usage, content_hash
from bench.imports.writing import NO_CALL, ImportProblems, add_records

_LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}  # Inspect's CORRECT, PARTIAL, INCORRECT, NOANSWER
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


def value_to_float(value: Any) -> float | None:
    """Inspect's default ``value_to_float``: C 1, P 0.5, I and N 0, yes/true 1, no/false 0, numbers as numbers;
    None where Inspect warns and takes 0 (a list, an unknown word), so the grade is recorded as failed instead."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    if value in _LETTERS or value.lower() in _WORDS:
        return _LETTERS.get(value, _WORDS.get(value.lower()))
    try:
        return float(value)
    except ValueError:
        return None


def import_inspect(path: str | Path, run_dir: str | Path) -> dict[str, Any]:
    """Import Inspect eval log ``path`` into ``run_dir``; return what was added and each scorer's mean and log's."""
    source = str(path)
    log = _read(Path(path))
    ev, records = log["eval"], []
    prompt_hash = content_hash({"task_args": ev.get("task_args"), "plan": log.get("plan")})
    for n, sample in enumerate(log["samples"], 1):
        records += [(n, r) for r in _sample(sample, ev, prompt_hash, source)]
    added = add_records(Path(run_dir), records, source)
    means: dict[str, list[float]] = {}
    for _n, r in records:
        if isinstance(r, Judgment) and r.score is not None:
            means.setdefault(r.judge_id, []).append(r.score)
    stated = {s.get("name"): next((m["value"] for k, m in (s.get("metrics") or {}).items()
                                   if k in ("accuracy", "mean")), None)
              for s in (log.get("results") or {}).get("scores", [])}
    return {"kind": "inspect", "samples": len(log["samples"]), **added,
            "scorers": {k: {"mean": sum(v) / len(v), "log": stated.get(k)} for k, v in means.items()}}


def _read(path: Path) -> dict[str, Any]:
    try:
        log = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ImportProblems(str(path), [f"1: not a JSON Inspect log ({err}); write it with `inspect eval … --log-"
                                         f"format json` or convert it: `inspect log convert --to json`"]) from None
    if not isinstance(log, dict) or not isinstance(log.get("eval"), dict) or "model" not in log["eval"]:
        raise ImportProblems(str(path), ["1: no eval.model: not an Inspect eval log"])
    if not log.get("samples"):
        raise ImportProblems(str(path), ["1: the log holds no samples (was it written with --no-log-samples?); "
                                         "re-run the eval with samples logged"])
    return log


def _text(content: Any) -> str:
    """The text of an Inspect input or message content: a string, or its text parts; of messages, the user's."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [m.get("content") if m.get("role") == "user" else m.get("text") if m.get("type") == "text" else None
                 for m in content if isinstance(m, dict)]
        return "\n".join(_text(p) for p in parts if p)
    return ""


def _sample(sample: dict[str, Any], ev: dict[str, Any], prompt_hash: str, source: str) -> list[Record]:
    question, model = _text(sample.get("input")), str(ev["model"])
    s = Scenario(fields={"id": str(sample.get("id")), "input": question}, reference={"target": sample.get("target")},
                 source=f"imported from {source}")
    out = sample.get("output") or {}
    used = (sample.get("model_usage") or {}).get(model) or out.get("usage") or {}
    error = sample.get("error")
    c = Candidate(model_id=model, model=model, params=ev.get("model_generate_config") or {}, prompt_id=str(ev["task"]),
                  prompt_version=str(ev.get("task_version", 0)), prompt_hash=prompt_hash, scenario_id=s.id,
                  sample=int(sample.get("epoch", 1)) - 1, messages=[{"role": "user", "content": question}],
                  output=None if error else out.get("completion", ""),
                  error=(error.get("message") if isinstance(error, dict) else str(error)) if error else None,
                  error_kind="inspect" if error else None,
                  usage=Usage(prompt_tokens=used.get("input_tokens"), completion_tokens=used.get("output_tokens"),
                              calls=0, cache_hits=0))  # cost_usd None: the log does not say what was paid
    return [s, c, *(_score(name, sc, c, source) for name, sc in (sample.get("scores") or {}).items())]


def _score(name: str, score: dict[str, Any], c: Candidate, source: str) -> Judgment:
    raw = score.get("value")
    values = ({str(k): value_to_float(v) for k, v in raw.items()} if isinstance(raw, dict)
              else {name: value_to_float(raw)})
    ok = all(v is not None for v in values.values()) and values
    grade = ({"scores": values, "score": sum(values.values()) / len(values)} if ok else  # type: ignore[arg-type]
             {"error": f"Inspect value {raw!r} is no score (C, I, P, N, a number, yes/no)", "error_kind": "inspect"})
    return Judgment(judge_id=name, judge_model=f"inspect/{name}", rubric_id=name, rubric_version="1",
                    rubric_hash=content_hash(name), mode="automated", candidate_ids=[c.id], scenario_id=c.scenario_id,
                    usage=NO_CALL, details={"value": raw, "answer": score.get("answer"),
                                            "explanation": score.get("explanation"), "imported_from": source},
                    **grade)
