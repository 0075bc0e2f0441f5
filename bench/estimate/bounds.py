"""The requests a conversation or an agent loop may make, bounded before anything is sent (`bench estimate`):
replayed through the response cache, then every later reply at the model's output bound."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.collect import WorkItem, request_messages
from bench.collect.conversation import request_transcript
from bench.collect.simulator import said_done, simulator_params, simulator_view, stops_at
from bench.config.entries import PromptEntry
from bench.config.templates import field_values, later_turns, text
from bench.core.records import Scenario
from bench.models.client import LLM

ARGUMENT_WORDS = 8  # a tool call's argument inside its result template: the model writes it, nothing bounds it
CALLABLE_RESULT_TOKENS = 500  # a Python tool's result: what nothing bounds before it runs
TOKENS_PER_WORD = 2  # a result's words as tokens: about 1.3 in English prose, more in numbers and code
SIMULATED = "#simulator"  # a cell key + this: the source of its simulated user's replies (bench.estimate.observed)
RESULT = None  # the source of a tool result in an Ask's history: a fixed bound, never an observed mean

History = tuple[tuple[str | None, int, int], ...]  # (whose replies, how many, each one's bound in tokens)


@dataclass(frozen=True)
class Bound:
    """The most requests one conversation of a prompt may make, and what bounds them, in words."""

    turns: int  # assistant turns at most
    steps: int  # model requests per assistant turn at most (1 without tools)
    simulator: int  # the simulated user's requests at most
    words: str  # "max_turns 6 and max_steps 8"

    @property
    def model(self) -> int:
        return self.turns * self.steps


def bound_of(prompt: PromptEntry) -> Bound:
    """Return the bound of a prompt's conversations (one request for a prompt of one reply)."""
    steps = prompt.step_limit if prompt.tools else 1
    sim = prompt.user_simulator
    turns = sim.max_turns if sim else len(prompt.turns) if prompt.turns else 1
    said = ([f"max_turns {turns}"] if sim else [f"{turns} scripted turns"] if prompt.turns else
            ["its messages"] if prompt.messages else []) + ([f"max_steps {steps}"] if prompt.tools else [])
    return Bound(turns, steps, turns - 1 if sim else 0, " and ".join(said) or "one reply")


@dataclass
class Ask:
    """One request to send (any stage's): its messages, what its reply length is estimated from (``source``), the
    replies in its input its messages lack (``history``, each at its bound) and its tools (JSON text)."""

    messages: list[dict]
    source: str
    history: History = ()
    tools: str = ""


@dataclass
class Conversation:
    """A conversation's requests: the model's and the simulated user's, how many of each the cache answers,
    the completion tokens of the cached replies read, and its transcript when the cache holds all of it."""

    model: list[Ask] = field(default_factory=list)  # to ask (not cached)
    simulator: list[Ask] = field(default_factory=list)
    model_requests: int = 0  # every request, cached ones included
    simulator_requests: int = 0
    model_cached: int = 0
    simulator_cached: int = 0
    replies: list[int] = field(default_factory=list)  # completion tokens of the model's cached replies
    transcript: list[dict[str, Any]] | None = None  # whole, when the cache answered every request
    output: str | None = None
    turns: list[dict[str, Any]] | None = None  # ... and its model turns (what a per_turn judge grades)


def conversation(item: WorkItem, llm: LLM, replies: tuple[int, int],
                 cached: Callable[[list[str]], list[bool]]) -> Conversation:
    """Return the requests of ``item``'s conversation: replayed through the response cache as far as it holds
    it, then bounded. ``replies``: the model's and the simulator's output bounds; ``cached``: as ``cached_keys``."""
    prompt, bound = item.cell.prompt, bound_of(item.cell.prompt)
    out = Conversation(model_requests=bound.model, simulator_requests=bound.simulator)
    tools = [t.definition() for t in prompt.tool_entries] or None
    transcript = [dict(m) for m in request_messages(item)]
    script = later_turns(prompt, item.scenario)
    definitions = json.dumps(tools) if tools else ""
    for turn in range(1, bound.turns + 1):
        key = llm.request_key(item.cell.model.spec(), request_transcript(transcript), tools=tools, sample=item.sample)
        reply = _replayed(llm, key, cached)
        if reply is None:
            _bounded(out, item, bound, (turn, 0, False), replies, definitions, request_transcript(transcript))
            return out
        out.model_cached += 1
        out.replies += _tokens(reply)
        said = reply.get("text") or ""
        if reply.get("tool_calls"):  # its result would have to be run: the rest of the loop is bounded
            if bound.steps > 1:
                _bounded(out, item, bound, (turn, 1, False), replies, definitions, [])
                return out
            transcript.append({"role": "assistant", "content": said or None, "tool_calls": reply["tool_calls"]})
            return _whole(out, transcript, said)  # ended at max_steps 1
        transcript.append({"role": "assistant", "content": said})
        if prompt.user_simulator is None:
            if turn > len(script):
                return _whole(out, transcript, said)
            transcript.append({"role": "user", "content": script[turn - 1]})
            continue
        if stops_at(prompt, said) or turn >= bound.turns:
            return _whole(out, transcript, said)
        sim = prompt.user_simulator
        view = simulator_view(prompt, item.scenario, transcript)
        key = llm.request_key(sim.spec(), view, params=simulator_params(prompt, item.sample), sample=item.sample)
        user = _replayed(llm, key, cached)
        if user is None:
            _bounded(out, item, bound, (turn, 0, True), replies, definitions, view)
            return out
        out.simulator_cached += 1
        transcript.append({"role": "user", "content": user.get("text") or "", "simulated": True})
        if said_done(prompt, user.get("text") or ""):
            return _whole(out, transcript, said)
    return _whole(out, transcript, transcript[-1].get("content") or "")


def _replayed(llm: LLM, key: str, cached: Callable[[list[str]], list[bool]]) -> dict | None:
    """Return the cached reply of ``key`` (None: not cached, or a repeat of a request counted before)."""
    if not cached([key])[0] or llm.cache is None:
        return None
    return llm.cache.get(key)


def _whole(out: Conversation, transcript: list[dict], said: str) -> Conversation:
    """Return ``out`` answered wholly by the cache: its requests are the ones replayed."""
    out.model_requests, out.simulator_requests = out.model_cached, out.simulator_cached
    out.transcript, out.output = transcript, said
    out.turns = [{"turn": k, "step": 0, "by": "model"} for k in range(1, out.model_cached + 1)]  # a step each
    return out


def _bounded(out: Conversation, item: WorkItem, bound: Bound, start: tuple[int, int, bool],
             replies: tuple[int, int], tools: str, first: list[dict]) -> None:
    """Add the requests from the first one the cache misses to the end of the bound. ``start``: (turn, step,
    whether it is the simulator's); ``first``: the first request's exact messages (none for a later tool step)."""
    prompt, cell = item.cell.prompt, item.cell.key
    turn, step0, simulator_first = start
    result = result_bound(prompt, item.scenario)
    opening = [dict(m) for m in request_messages(item)]
    script = later_turns(prompt, item.scenario)
    sim_view = simulator_view(prompt, item.scenario, opening) if prompt.user_simulator else []
    left = (0 if simulator_first else bound.steps - step0) + (bound.turns - turn) * bound.steps
    out.model_requests = out.model_cached + left
    out.simulator_requests = out.simulator_cached + max(0, bound.simulator - turn + 1)
    for k in range(turn, bound.turns + 1):
        if not (k == turn and simulator_first):
            users = [{"role": "user", "content": t} for t in script[:k - 1]]
            for step in range(step0 if k == turn else 0, bound.steps):
                exact = k == turn and step == 0 and bool(first)
                before = (k - 1) * bound.steps + step  # the replies (and tool results) ahead of it, at most
                history = () if exact else (
                    (cell, before, replies[0]), (RESULT, before - (k - 1), result),
                    (cell + SIMULATED, k - 1 if prompt.user_simulator else 0, replies[1]))
                out.model.append(Ask(first if exact else opening + users, cell, history, tools))
        if prompt.user_simulator and k < bound.turns:
            exact = k == turn and simulator_first
            out.simulator.append(Ask(first if exact else sim_view, cell + SIMULATED, () if exact else (
                (cell, k, replies[0]), (cell + SIMULATED, k - 1, replies[1]))))


def result_bound(prompt: PromptEntry, scenario: Scenario) -> int:
    """Return the most tokens one tool result of ``prompt`` may take for ``scenario``: its largest tool's (a
    template's or a given result's words at ``TOKENS_PER_WORD``, a Python tool's ``CALLABLE_RESULT_TOKENS``)."""
    return max((TOKENS_PER_WORD * len(r.split()) if r is not None else CALLABLE_RESULT_TOKENS
                for r in _results(prompt, scenario).values()), default=0)


def _results(prompt: PromptEntry, scenario: Scenario) -> dict[str, str | None]:
    """Return each tool's result for ``scenario`` at its bound: the scenario's ``tool_results``, else its template
    filled with the scenario's fields and each argument as ``ARGUMENT_WORDS`` words; None for a Python tool."""
    given = scenario.fields.get("tool_results")
    given = given if isinstance(given, dict) else {}
    values = field_values(scenario)
    stand_in = " ".join(["x"] * ARGUMENT_WORDS)
    out: dict[str, str | None] = {}
    for tool in prompt.tool_entries:
        if tool.name in given:
            out[tool.name] = text(given[tool.name])
        elif tool.result is not None:
            try:
                out[tool.name] = tool.result.format_map({**values, **{a: stand_in for a in tool.argument_names()}})
            except (KeyError, AttributeError, IndexError, ValueError):  # a field the scenario lacks: the run says so
                out[tool.name] = f"{tool.result} {stand_in}"
        else:
            out[tool.name] = None
    return out


def _tokens(reply: dict | None) -> list[int]:
    tokens = ((reply or {}).get("usage") or {}).get("completion_tokens")
    return [int(tokens)] if isinstance(tokens, int) and not isinstance(tokens, bool) else []


def stand_in(item: WorkItem, reply: str, user: str) -> dict[str, Any]:
    """Return the conversation a judge is shown of an answer not collected yet: its opening, then each assistant
    turn of its bound as ``reply`` after the tool calls its steps allow, each later user turn scripted or ``user``."""
    prompt, bound = item.cell.prompt, bound_of(item.cell.prompt)
    transcript = [dict(m) for m in request_messages(item)]
    script = later_turns(prompt, item.scenario)
    calls = _calls(prompt, item.scenario, bound.steps if prompt.tools else 0)
    for turn in range(1, bound.turns + 1):
        for n, (call, result) in enumerate(calls):
            step = {**call, "id": f"call_{turn}_{n}"}
            transcript += [{"role": "assistant", "content": None, "tool_calls": [step]},
                           {"role": "tool", "tool_call_id": step["id"], "name": call["function"]["name"],
                            "content": result}]
        transcript.append({"role": "assistant", "content": reply})
        if turn < bound.turns:
            transcript.append({"role": "user", "content": script[turn - 1]} if not prompt.user_simulator else
                              {"role": "user", "content": user, "simulated": True})
    return {"output": reply, "transcript": transcript,
            "turns": [{"turn": k, "step": 0, "by": "model"} for k in range(1, bound.turns + 1)]}


def _calls(prompt: PromptEntry, scenario: Scenario, steps: int) -> list[tuple[dict, str]]:
    """Return ``steps`` stand-in calls of the largest tool (``ARGUMENT_WORDS`` words per argument) and results."""
    results = _results(prompt, scenario)
    if not steps or not results:
        return []
    name = max(results, key=lambda n: CALLABLE_RESULT_TOKENS if results[n] is None else
               TOKENS_PER_WORD * len(results[n].split()))
    tool = next(t for t in prompt.tool_entries if t.name == name)
    stand_in = " ".join(["x"] * ARGUMENT_WORDS)
    arguments = json.dumps({a: stand_in for a in sorted(tool.argument_names())})
    result = results[name] if results[name] is not None else " ".join(["x"] * CALLABLE_RESULT_TOKENS)
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    return [(call, result)] * steps
