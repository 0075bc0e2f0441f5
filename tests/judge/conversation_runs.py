"""Runs whose answers are conversations, for the judge tests: collected on the fake provider, then rewritten with a
transcript, the turns and a trajectory (the records the collect stage writes for a conversation), so that the
judge stage and the analysis are tested on the same records whatever the collect side does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.run import Run, open_run
from bench.stage_runs import run_collect
from bench.testing.grids import generate, grid, judge, model, prompt


def rubric_file(folder: Path, rid: str, front: str, body: str = "Grade the conversation.") -> str:
    """Write ``folder/<rid>.md`` with this front matter (after id and version) and body; return its path."""
    path = folder / f"{rid}.md"
    path.write_text(f"---\nid: {rid}\nversion: '1'\n{front}---\n{body}\n")
    return str(path)


def collected(tmp_path: Path, url: str, judges: list[tuple[str, str, dict]], scenarios: int = 2) -> Run:
    """Return a run of one model over ``scenarios`` scenarios, collected, with these judges: (id, rubric path,
    extra entry keys). BENCH_RUNS must point under ``tmp_path`` (the test's monkeypatch)."""
    params = grid(tmp_path / "conv.yaml", url, name="conv", models=[model("m1", url)],
                  prompts=[prompt("p", "Plan a trip to {city}.")],
                  scenarios=generate(city=[f"city{i}" for i in range(scenarios)]),
                  judges=[judge(jid, url, rubric=path, name=f"judge-{jid}", **extra) for jid, path, extra in judges])
    run = open_run(params)
    asyncio.run(run_collect(run, progress="none"))
    return run


def rewrite(run: Run, change: Callable[[Candidate], Candidate]) -> list[Candidate]:
    """Append ``change(c)`` of every answer of the run (same id: the later record is the one read); return them."""
    store = RunStore(run.dir)
    changed = [change(c) for c in sorted(store.latest(Candidate).values(), key=lambda c: c.scenario_id)]
    store.append(changed)
    return changed


def call(cid: str, name: str, arguments: dict) -> dict:
    """Return a tool call in OpenAI's wire form."""
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def chat(c: Candidate, answers: list[str]) -> Candidate:
    """Return ``c`` as a scripted chat: the user asks, the model answers ``answers`` one turn after another."""
    transcript: list[dict] = [{"role": "system", "content": "You plan trips."}]
    for n, answer in enumerate(answers, 1):
        transcript += [{"role": "user", "content": f"User turn {n} about {c.scenario_id}."},
                       {"role": "assistant", "content": answer}]
    turns = [{"turn": n, "step": 0, "by": "model", "usage": {}} for n in range(1, len(answers) + 1)]
    return c.model_copy(update={"transcript": transcript, "turns": turns, "output": answers[-1],
                                "ended": "turns_done"})


def agent(c: Candidate, tools: list[tuple[str, dict, str]], answer: str) -> Candidate:
    """Return ``c`` as an agent's single turn: it calls ``tools`` (name, arguments, result) one per request, then
    answers ``answer``."""
    transcript: list[dict] = [{"role": "user", "content": f"Plan the trip of {c.scenario_id}."}]
    trajectory, turns = [], []
    for step, (name, args, result) in enumerate(tools):
        cid = f"call_{step}"
        transcript += [{"role": "assistant", "content": None, "tool_calls": [call(cid, name, args)]},
                       {"role": "tool", "tool_call_id": cid, "name": name, "content": result}]
        trajectory.append({"turn": 1, "step": step, "id": cid, "name": name, "arguments": args,
                           "raw_arguments": json.dumps(args), "result": result, "outcome": "ok"})
        turns.append({"turn": 1, "step": step, "by": "model", "usage": {}})
    transcript.append({"role": "assistant", "content": answer})
    turns.append({"turn": 1, "step": len(tools), "by": "model", "usage": {}})
    return c.model_copy(update={"transcript": transcript, "turns": turns, "trajectory": trajectory,
                                "output": answer, "ended": "answered"})
