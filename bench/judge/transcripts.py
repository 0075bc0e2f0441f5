"""Conversations as a judge reads them (a transcript as text, its turns, the items graded of it): one bracketed
header line per message, its lines indented below, so no message can pass itself off as another."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from bench.config.checks import Trajectory
from bench.core.images import content_text
from bench.core.records import Candidate, Scenario
from bench.judge._prompts import CONVERSATION, RESPONSE, TURN, clip, clip_middle
from bench.judge.grader import Item, Judge


def transcript_text(candidate: Candidate, upto: int | None = None) -> str:
    """Return the candidate's conversation as a judge reads it, to the end of turn ``upto`` (a plain answer: turn 1)."""
    messages = candidate.transcript
    if messages is None:
        messages = [*candidate.messages, {"role": "assistant", "content": candidate.output}]
        spans = [(len(messages) - 1, len(messages))]
    else:
        spans = turn_spans(candidate)
    end = spans[upto - 1][1] if upto and upto <= len(spans) else len(messages)
    turn_of = {i: n for n, (start, stop) in enumerate(spans, 1) for i in range(start, stop)}
    return "\n\n".join(_message(m, turn_of.get(i)) for i, m in enumerate(messages[:end]))


def turn_count(candidate: Candidate) -> int:
    """Return the assistant turns the model answered: those ``Candidate.turns`` names, else the runs; 1 if plain."""
    if candidate.transcript is None:
        return 1
    named = [t.get("turn") for t in candidate.turns or () if t.get("by", "model") == "model"]
    if named and all(isinstance(n, int) for n in named):
        return max(named)
    return len(_runs(candidate.transcript)) or 1


def turn_spans(candidate: Candidate) -> list[tuple[int, int]]:
    """Return the [start, stop) range of each model turn in the transcript: its last ``turn_count`` runs."""
    runs = _runs(candidate.transcript or [])
    n = turn_count(candidate)
    return runs[-n:] if n < len(runs) else runs


def answer_items(judge: Judge, scenario: Scenario, candidate: Candidate, question: str) -> list[Item]:
    """Return the items ``judge`` grades of ``candidate``: one, or one per assistant turn (``per_turn``)."""
    traj = Trajectory.of(candidate.trajectory, candidate.turns)
    if not judge.rubric.per_turn:
        shown = transcript_text(candidate) if candidate.transcript is not None else None
        return [Item(scenario, question, (candidate.output or "",), (candidate.id,),
                     reasonings=(candidate.reasoning,), transcripts=(shown,), trajectories=(traj,))]
    if candidate.transcript is None:  # a plain answer is one turn: shown as a plain answer
        return [Item(scenario, question, (candidate.output or "",), (candidate.id,), reasonings=(candidate.reasoning,),
                     transcripts=(None,), trajectories=(traj,), turn=1)]
    n = len(turn_spans(candidate))
    return [Item(scenario, asked(candidate, k) or question, (_answer(candidate, k),), (candidate.id,),
                 reasonings=(candidate.reasoning if k == n else None,), transcripts=(transcript_text(candidate, k),),
                 trajectories=(Trajectory.of(candidate.trajectory, candidate.turns, k),), turn=k)
            for k in range(1, n + 1)]


def shown_text(judge: Judge, item: Item, index: int) -> tuple[str, dict[str, Any]]:
    """Return the item's ``index``-th response as shown (a conversation middle-cut, a text end-cut) and its note."""
    transcript = item.transcripts[index] if index < len(item.transcripts) else None
    if transcript is None:
        return clip(item.texts[index], judge.rubric.max_chars)
    return clip_middle(transcript, judge.rubric.max_chars)


def framed_response(item: Item, index: int, tag: str, text: str) -> str:
    """Return the tagged block of the item's ``index``-th response, after a conversation's heading line."""
    block = RESPONSE.format(tag=tag, text=text)
    if index >= len(item.transcripts) or item.transcripts[index] is None:
        return block
    return (TURN.format(turn=item.turn) if item.turn is not None else CONVERSATION) + block


def _runs(messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Return the [start, stop) ranges of the runs of assistant and tool messages, in order."""
    runs, start = [], None
    for i, m in enumerate(messages):
        inside = m.get("role") in ("assistant", "tool")
        if inside and start is None:
            start = i
        elif not inside and start is not None:
            runs.append((start, i))
            start = None
    return runs + ([(start, len(messages))] if start is not None else [])


def asked(candidate: Candidate, turn: int | None = None) -> str | None:
    """Return the user message the model's ``turn`` (default: last) answers, as a judge is told; None if none."""
    spans = turn_spans(candidate)
    turn = len(spans) if turn is None else turn
    if candidate.transcript is None or not 1 <= turn <= len(spans):
        return None
    before = candidate.transcript[:spans[turn - 1][0]]  # type: ignore[index]
    return next((content_text(m.get("content")) for m in reversed(before) if m.get("role") == "user"), None)


def _answer(candidate: Candidate, turn: int) -> str:
    """Return the model's answer in ``turn``: its last assistant message's text ("" when it had only tool calls)."""
    start, stop = turn_spans(candidate)[turn - 1]
    said = [m for m in candidate.transcript[start:stop] if m.get("role") == "assistant"]  # type: ignore[index]
    return content_text(said[-1].get("content")) if said else ""


def _message(m: dict[str, Any], turn: int | None) -> str:
    """Return one message as a header line and its indented body."""
    role = m.get("role")
    if role == "assistant":
        head = f"[assistant, turn {turn}]" if turn else "[assistant, given in the prompt]"
    elif role == "user":
        head = "[user, simulated]" if m.get("simulated") else "[user]"
    elif role == "tool":
        call = f", call {_one_line(m['tool_call_id'])}" if m.get("tool_call_id") else ""
        head = f"[tool result: {_one_line(m.get('name') or '?')}{call}]"
    else:
        head = f"[{_one_line(role or '?')}]"
    lines = [text] if (text := content_text(m.get("content"))) else []
    for call in m.get("tool_calls") or []:
        fn = call.get("function") or {}
        args = fn.get("arguments")
        args = args if isinstance(args, str) or args is None else json.dumps(args, ensure_ascii=False)
        ident = f" (call {call['id']})" if call.get("id") else ""
        lines.append(f"→ tool call {fn.get('name') or '?'} {args or ''}".rstrip() + ident)
    body = "\n".join(lines) or ("(no text)" if role == "assistant" else "")
    return head + ("\n" + textwrap.indent(body, "  ") if body else "")


def _one_line(value: Any) -> str:
    """Return ``value`` on one line, brackets and commas replaced: a model-chosen name cannot fake a header."""
    return " ".join(str(value).translate(_HEADER_SAFE).split())


_HEADER_SAFE = str.maketrans({"[": "(", "]": ")", ",": ";"})
