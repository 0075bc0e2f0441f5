"""A conversation or a tool loop, answered turn by turn into one Candidate with its whole transcript; a retry
replays finished turns from the cache, a budget stop keeps what was paid."""

from __future__ import annotations

import asyncio
import warnings
from dataclasses import dataclass, field
from typing import Any

from bench.collect.simulator import said_done, simulated_reply, stops_at
from bench.collect.tool_runs import run_call
from bench.collect.work_items import WorkItem, make_candidate, request_messages
from bench.config.templates import later_turns
from bench.core.errors import BudgetReached, Halted, ProviderError
from bench.core.records import Candidate, Usage, add_usage, failed_usage
from bench.core.secrets import redact
from bench.models.client import LLM, Completion

# what a request carries of a transcript message (Claude wants the signed thinking before its tool calls back)
_REQUEST_KEYS = {"role", "content", "tool_calls", "tool_call_id", "thinking_blocks"}


@dataclass
class Dialogue:
    """A conversation as it goes: its messages, each request's usage, each tool call."""

    item: WorkItem
    opening: list[dict[str, Any]]  # the first request's messages (the candidate's ``messages``)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    usages: dict[str, list[Usage]] = field(default_factory=lambda: {"model": [], "simulator": []})
    reasoning: str | None = None

    def count(self, usage: Usage, turn: int, step: int, by: str) -> None:
        """Record one request's usage: in its turn's entry, and in the model's or the simulator's total."""
        self.usages[by].append(usage)
        sim = self.item.cell.prompt.user_simulator if by == "simulator" else None
        self.turns.append({"turn": turn, "step": step, "by": by, **({"simulator": sim.id} if sim else {}),
                           "usage": usage.model_dump()})  # "simulator": its id, the label of its cost line

    def paid(self) -> bool:
        """Return True when some request of this attempt was sent (not answered by the cache)."""
        return any(u.calls for parts in self.usages.values() for u in parts)

    def output(self) -> str:
        """Return the last assistant message's text ("" when it had only tool calls)."""
        return next((m.get("content") or "" for m in reversed(self.transcript) if m["role"] == "assistant"), "")

    def candidate(self, attempt: int, ended: str | None = None, error: Exception | None = None,
                  error_kind: str | None = None) -> Candidate:
        """Return the Candidate of the conversation: answered (``ended`` says why it stopped) or failed."""
        prompt = self.item.cell.prompt
        return make_candidate(
            self.item, self.opening, output=None if error is not None else self.output(), error=error,
            usage=add_usage(self.usages["model"]), attempt=attempt, reasoning=self.reasoning,
            transcript=self.transcript, turns=self.turns, trajectory=self.trajectory if prompt.tools else None,
            ended=ended, simulator_usage=add_usage(self.usages["simulator"]) if prompt.user_simulator else None,
            **({"error_kind": error_kind} if error_kind else {}))


async def converse(item: WorkItem, llm: LLM, attempt: int = 1) -> Candidate:
    """Answer a conversation; a failed request makes a failed candidate (transcript so far); ``Halted`` propagates."""
    opening = request_messages(item)
    talk = Dialogue(item, opening, [dict(m) for m in opening])
    try:
        ended = await _talk(talk, llm)
    except ProviderError as err:
        return talk.candidate(attempt, error=err)
    except Halted as stop:
        raise _kept(stop, talk, attempt) from None
    except asyncio.CancelledError:
        raise
    except Exception as err:  # a bug must not lose the sweep: record it, warn, go on
        warnings.warn(f"collect: unexpected {type(err).__name__} for {item.candidate_id}: {redact(str(err))}",
                      RuntimeWarning)
        return talk.candidate(attempt, error=err)
    return talk.candidate(attempt, ended=ended)


async def _talk(talk: Dialogue, llm: LLM) -> str:
    """Hold the conversation to its end; return why it ended."""
    prompt, scenario = talk.item.cell.prompt, talk.item.scenario
    script = later_turns(prompt, scenario)
    turn = 0
    while True:
        turn += 1
        if not await _assistant_turn(talk, llm, turn):
            return "max_steps"
        if prompt.user_simulator is None:
            if turn > len(script):
                return "answered" if prompt.user is not None else "turns_done"
            talk.transcript.append({"role": "user", "content": script[turn - 1]})
            continue
        if stops_at(prompt, talk.output()):
            return "stop_when"
        if turn >= prompt.user_simulator.max_turns:
            return "max_turns"
        said = await _ask(talk, turn, 0, "simulator", simulated_reply(
            prompt, scenario, talk.transcript, talk.item.sample, llm, talk.item.candidate_id))
        talk.transcript.append({"role": "user", "content": said.text, "simulated": True})
        if said_done(prompt, said.text):
            return "user_done"


async def _assistant_turn(talk: Dialogue, llm: LLM, turn: int) -> bool:
    """Ask for one assistant turn, running its tool calls; return False when still calling tools after ``max_steps``."""
    item = talk.item
    tools = item.cell.prompt.tool_entries
    definitions = [t.definition() for t in tools] or None
    for step in range(item.cell.prompt.step_limit if tools else 1):
        comp = await _ask(talk, turn, step, "model", llm.complete(
            item.cell.model.spec(), request_transcript(talk.transcript), tools=definitions, sample=item.sample,
            label=item.candidate_id))
        talk.reasoning = comp.reasoning
        calls = comp.tool_calls if tools else None
        signed = {"thinking_blocks": comp.thinking_blocks} if calls and comp.thinking_blocks else {}
        talk.transcript.append({"role": "assistant", "content": comp.text if comp.text or not calls else None,
                                **({"tool_calls": calls} if calls else {}), **signed})
        if not calls:
            return True
        for call in calls:
            message, entry = await run_call(call, tools, item.scenario, turn, step)
            talk.transcript.append(message)
            talk.trajectory.append(entry)
    return False


async def _ask(talk: Dialogue, turn: int, step: int, by: str, request: Any) -> Completion:
    """Await one request of the conversation and count its usage (a failed one's too) as ``by``'s."""
    try:
        comp = await request
    except ProviderError as err:
        talk.count(failed_usage(err), turn, step, by)
        raise
    talk.count(comp.usage, turn, step, by)
    return comp


def request_transcript(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the transcript with OpenAI's message keys only, so the same history is always the same request."""
    return [{k: v for k, v in m.items() if k in _REQUEST_KEYS} for m in transcript]


def _kept(stop: Halted, talk: Dialogue, attempt: int) -> Halted:
    """Return ``stop`` noting the conversation's failed candidate when this attempt paid for some requests."""
    if talk.paid():
        kind = "budget" if isinstance(stop, BudgetReached) else "stopped"
        failed = talk.candidate(attempt, error=RuntimeError(f"the conversation's paid requests are kept, then the "
                                                            f"next one was not sent: {stop}"), error_kind=kind)
        stop.finished = [*getattr(stop, "finished", []), failed]  # type: ignore[attr-defined]
    return stop
