"""A conversation's transcript as readable, escaped HTML: what the report's listing and the review panel show.
Everything from the run is escaped and clipped: no transcript text can become markup."""

from __future__ import annotations

import html
import json
from typing import Any

from bench.core.records import Candidate
from bench.report.display import CLIP_CHARS, folded, visible

CALL_CHARS = 100  # a tool call's arguments in its one-line summary; the whole of them is inside
CSS = ("<style>.bench-talk{font-size:13px;margin:4px 0 10px;max-width:60em}"
       ".bench-talk .bench-msg{border-left:3px solid #ccc;padding:2px 8px;margin:4px 0}"
       ".bench-talk .bench-user{border-color:#5b8def}.bench-talk .bench-assistant{border-color:#3a9b5c}"
       ".bench-talk .bench-role{font-weight:bold;font-size:12px;color:#444}"
       ".bench-talk .bench-text,.bench-talk pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:2px 0;"
       "max-height:20em;overflow:auto;font-family:inherit}"
       ".bench-talk pre{font-family:monospace;font-size:12px;background:#f7f7f9;padding:4px}"
       ".bench-talk details{margin:3px 0}.bench-talk summary{cursor:pointer;color:#333}"
       ".bench-talk .bench-call summary{font-family:monospace;font-size:12px}"
       ".bench-talk .bench-bad{color:#a33;font-weight:bold}.bench-talk .bench-ended{color:#555;font-size:12px}"
       "</style>")


def _e(value: Any, limit: int | None = CLIP_CHARS) -> str:
    """Return a run's text escaped for HTML, control characters visible, clipped past ``limit``."""
    return html.escape(visible("" if value is None else str(value), limit))


def content_text(content: Any) -> str:
    """Return a message's content as text (a list's text parts joined, an image as ``[image]``, None as "")."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") if p.get("type") == "text" else f"[{p.get('type', 'part')}]"
                         for p in content if isinstance(p, dict))
    return str(content)


def _arguments(raw: Any) -> str:
    """Return a call's arguments as the model wrote them, indented when they are a JSON object."""
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, indent=1)
    except (TypeError, ValueError):
        return text


def _call_html(call: dict[str, Any], result: dict[str, Any] | None, step: dict[str, Any] | None) -> str:
    """Return one tool call folded: ``name(arguments)`` and its outcome, then its arguments and result."""
    fn = call.get("function") or {}
    raw = fn.get("arguments", "")
    one_line = " ".join(raw.split()) if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    outcome = (step or {}).get("outcome")
    bad = f' <span class="bench-bad">{_e(outcome)}</span>' if outcome and outcome != "ok" else ""
    body = f"<div>arguments</div><pre>{_e(_arguments(raw))}</pre>"
    if result is not None:
        body += f"<div>result</div><pre>{_e(content_text(result.get('content')))}</pre>"
    else:
        body += "<div><i>no result in the transcript</i></div>"
    return (f'<details class="bench-call"><summary>tool call {_e(fn.get("name"), 200)}({_e(one_line, CALL_CHARS)})'
            f"{bad}</summary>{body}</details>")


def _message_html(message: dict[str, Any], results: dict[str, dict], steps: dict[str, dict], thinking: str | None = None
                  ) -> str:
    """Return one message (its tool calls and ``thinking`` folded); "" for a tool result shown in its call."""
    role = str(message.get("role") or "?")
    text = content_text(message.get("content"))
    if role == "system":
        return (f'<details class="bench-system"><summary>system</summary><div class="bench-text">{_e(text)}</div>'
                f"</details>")
    if role == "tool":
        if message.get("tool_call_id") in results:
            return ""  # shown inside the call it answers
        return (f'<details class="bench-call"><summary>tool result {_e(message.get("name"), 200)}</summary>'
                f"<pre>{_e(text)}</pre></details>")
    label = role + (" (simulated)" if message.get("simulated") else "")
    calls = [c for c in message.get("tool_calls") or () if isinstance(c, dict)]
    body = folded(thinking) + (f'<div class="bench-text">{_e(text)}</div>' if text or not calls else "")
    body += "".join(_call_html(c, results.get(c.get("id")), steps.get(c.get("id"))) for c in calls)
    kind = role if role in ("user", "assistant") else "other"
    return f'<div class="bench-msg bench-{kind}"><div class="bench-role">{_e(label, 100)}</div>{body}</div>'


def transcript_html(transcript: list[dict[str, Any]], trajectory: list[dict[str, Any]] | None = None,
                    thinking: str | None = None) -> str:
    """Return a transcript's messages as escaped HTML (:data:`CSS`), tool calls and ``thinking`` folded."""
    messages = [m for m in transcript or () if isinstance(m, dict)]
    called = {c.get("id") for m in messages for c in m.get("tool_calls") or () if isinstance(c, dict)}
    results = {m.get("tool_call_id"): m for m in messages
               if m.get("role") == "tool" and m.get("tool_call_id") in called}
    steps = {s.get("id"): s for s in trajectory or () if isinstance(s, dict) and s.get("id")}
    last = max((n for n, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return "".join(_message_html(m, results, steps, thinking if n == last else None) for n, m in enumerate(messages))


def assistant_turns(c: Candidate) -> int:
    """Return a conversation's assistant turns (a tool loop's steps are one turn)."""
    turns = {t.get("turn") for t in c.turns or () if isinstance(t, dict) and t.get("by", "model") == "model"}
    return len(turns) if turns else sum(m.get("role") == "assistant" for m in c.transcript or () if isinstance(m, dict))


def outcome_counts(c: Candidate) -> dict[str, int]:
    """Return how many of a conversation's tool calls had each outcome ("ok", "unknown_tool", …)."""
    out: dict[str, int] = {}
    for step in c.trajectory or ():
        if isinstance(step, dict):
            key = str(step.get("outcome") or "unknown")
            out[key] = out.get(key, 0) + 1
    return out


def conversation_line(c: Candidate) -> str:
    """Return a conversation in one line: its turns, tool calls by outcome, why it ended (or its error)."""
    turns = assistant_turns(c)
    said = [f"{turns} assistant turn{'s' if turns != 1 else ''}"]
    outcomes = outcome_counts(c)
    if outcomes:
        calls = sum(outcomes.values())
        bad = ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items()) if k != "ok")
        said.append(f"{calls} tool call{'s' if calls != 1 else ''}" + (f" ({bad})" if bad else ""))
    said.append(f"ended: {c.ended}" if c.ended else f"failed: {c.error}" if c.error else "ended: —")
    return " · ".join(said)


def candidate_transcript_html(c: Candidate, *, css: bool = True, line: bool = True) -> str:
    """Return a candidate's transcript (or output) as a styled block, summary first (``line``), styles (``css``)."""
    if not c.transcript:
        body = (f'<div class="bench-msg bench-assistant">{folded(c.reasoning)}<div class="bench-text">'
                f"{_e(c.output)}</div></div>")
    else:
        body = transcript_html(c.transcript, c.trajectory, c.reasoning)
    said = f'<div class="bench-ended">{_e(conversation_line(c), 600)}</div>' if c.transcript and line else ""
    return f'{CSS if css else ""}<div class="bench-talk">{said}{body}</div>'
