"""The simulated user of a conversation: it sees the talk with roles flipped (no tool traffic); its requests
are seeded and keyed by the sample, so a grid says the same again and a resumed talk replays from the cache."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from bench.config.entries import PromptEntry
from bench.config.params import Cell
from bench.config.templates import fill_instructions
from bench.core.images import content_text
from bench.core.records import Scenario
from bench.models.client import LLM, Completion
from bench.models.routing import ModelSpec

_FLIPPED = {"user": "assistant", "assistant": "user"}


def simulator_view(prompt: PromptEntry, scenario: Scenario, transcript: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Return the simulator's messages: its instructions, then the talk so far with roles flipped (text only)."""
    view = [{"role": "system", "content": fill_instructions(prompt, scenario)}]
    for message in transcript:
        said = content_text(message.get("content"))
        if message.get("role") in _FLIPPED and said:
            view.append({"role": _FLIPPED[message["role"]], "content": said})
    return view


def simulator_params(prompt: PromptEntry, sample: int) -> dict[str, Any] | None:
    """Return the params the simulator's requests add to its own: ``seed`` (the sweep's + the sample) unless set."""
    sim = prompt.user_simulator
    assert sim is not None
    return None if "seed" in sim.params else {"seed": prompt.sweep_seed + sample}


async def simulated_reply(prompt: PromptEntry, scenario: Scenario, transcript: list[dict[str, Any]], sample: int,
                          llm: LLM, label: str) -> Completion:
    """Return the simulator's next user message (raises ProviderError, or Halted when the budget refuses it)."""
    sim = prompt.user_simulator
    assert sim is not None
    return await llm.complete(sim.spec(), simulator_view(prompt, scenario, transcript),
                              params=simulator_params(prompt, sample), sample=sample, label=label)


def said_done(prompt: PromptEntry, reply: str) -> bool:
    """Return True when the simulator's reply holds its ``done`` marker: the user ends the conversation."""
    return prompt.user_simulator is not None and prompt.user_simulator.done in reply


def stops_at(prompt: PromptEntry, reply: str) -> bool:
    """Return True when an assistant reply matches the simulator's ``stop_when`` regex: the conversation ends."""
    sim = prompt.user_simulator
    return sim is not None and sim.stop_when is not None and re.search(sim.stop_when, reply) is not None


def simulator_specs(cells: Iterable[Cell]) -> list[ModelSpec]:
    """Return the endpoint of each simulated user of ``cells``' prompts, once each: models the preflight checks."""
    return list(dict.fromkeys(c.prompt.user_simulator.spec() for c in cells if c.prompt.user_simulator is not None))
