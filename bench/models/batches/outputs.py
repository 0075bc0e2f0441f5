"""One line of a batch's output or error file, read as OpenAI's ``(custom_id, status, body, error)`` (Bedrock's too);
``read_files`` trusts no line: conflicts, unknown and unreadable lines counted, billed unused lines listed."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

JSON_TOOL = "json_tool_call"  # the tool LiteLLM asks a JSON-mode answer through (its RESPONSE_FORMAT_TOOL_NAME)
Line = tuple[str, int | None, Any, Any]  # custom_id, HTTP status, body, error
Reply = tuple[int | None, Any, Any]  # a line less its custom_id: HTTP status, body, error
_CUSTOM_ID = re.compile(rb'"(?:custom_id|recordId)"\s*:\s*"([^"\\]{1,200})"')
_USAGE = re.compile(rb'"usage"\s*:\s*(\{[^{}]*\})')


@dataclass
class Files:
    """A finished batch's output and error files, read line by line against the requests it holds."""

    replies: dict[str, Reply] = field(default_factory=dict)  # custom_id → its one reply (first if repeated alike)
    conflicts: dict[str, list[Reply]] = field(default_factory=dict)  # custom_id → its different replies
    extra: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # custom_id → usage of lines not used
    unknown: list[dict[str, Any] | None] = field(default_factory=list)  # usage of each line of no request
    unreadable: list[str | None] = field(default_factory=list)  # custom_id (if salvaged) of each broken line

    def answered(self, keys: set[str]) -> set[str]:
        """Return the requests of ``keys`` that have one reply with HTTP 200 (a conflict is not an answer)."""
        return {k for k, (status, _b, _e) in self.replies.items() if status == 200 and k in keys}


def read_files(output: bytes, errors: bytes, keys: set[str]) -> Files:
    """Return what a batch's output and error files say of the requests ``keys`` (see the module's doc)."""
    files = Files()
    for raw in (*output.splitlines(), *errors.splitlines()):
        if not raw.strip():
            continue
        try:
            line = read_line(json.loads(raw))  # OpenAI's lines, or Bedrock's records
        except (ValueError, AttributeError, KeyError, TypeError):
            line = None
        if line is None:
            _salvage(files, raw, keys)
            continue
        cid, reply = line[0], line[1:]
        if cid not in keys:
            files.unknown.append(usage_of(reply[1]) if reply[0] == 200 else None)
        elif cid in files.conflicts:
            files.conflicts[cid].append(reply)
        elif cid not in files.replies:
            files.replies[cid] = reply
        elif same(files.replies[cid], reply):
            if reply[0] == 200:
                files.extra.setdefault(cid, []).append(usage_of(reply[1]) or {})
        else:
            files.conflicts[cid] = [files.replies.pop(cid), reply]
    return files


def odd_lines(files: Files) -> str:
    """Return what a batch's files held besides one line per request, for one progress line ("" when nothing)."""
    return ", ".join(f"{n} {what}" for n, what in (
        (len(files.conflicts), "request(s) answered twice, differently (recorded failed: batch_conflict, both "
                               "replies kept in the ledger)"),
        (len(files.unknown), "line(s) of no request"), (len(files.unreadable), "unreadable line(s)")) if n)


def _salvage(files: Files, raw: bytes, keys: set[str]) -> None:
    """Count a line that is not JSON: its custom_id and usage, when they can be read, charge its request."""
    found = _CUSTOM_ID.search(raw)
    cid = found.group(1).decode("utf-8", "replace") if found else None
    usage = _USAGE.search(raw)
    try:
        used = json.loads(usage.group(1)) if usage else None
    except ValueError:
        used = None
    if cid in keys:
        files.unreadable.append(cid)
        files.extra.setdefault(cid, []).append(used or {})  # {}: usage unknown, estimated by the queue
    else:
        files.unreadable.append(None)
        files.unknown.append(used)


def usage_of(body: Any) -> dict[str, Any] | None:
    """Return a reply body's token usage as OpenAI names it, or None when it has none."""
    used = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(used, dict) or used.get("prompt_tokens") is None:
        return None
    return {"prompt_tokens": used.get("prompt_tokens"), "completion_tokens": used.get("completion_tokens") or 0}


def same(a: Reply, b: Reply) -> bool:
    """Return whether two lines for one custom_id say the same (status, choices or error; not ids or times)."""
    return shown(a) == shown(b)


def shown(reply: Reply) -> str:
    """Return what a reply says: its content for an answer, else its status and error (a conflict keeps both)."""
    status, body, error = reply
    if status == 200 and isinstance(body, dict):
        choices = body.get("choices") or []
        if len(choices) == 1 and isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict):
            content = choices[0]["message"].get("content")
            if isinstance(content, str) and not choices[0]["message"].get("tool_calls"):
                return content
        return json.dumps(choices, sort_keys=True, ensure_ascii=False)
    detail = body.get("error") if isinstance(body, dict) else None
    return f"HTTP {status}: " + json.dumps(detail or error, sort_keys=True, ensure_ascii=False)


def read_line(line: dict[str, Any]) -> Line | None:
    """Return one output-file line as ``(custom_id, status, body, error)``, or None when it is not one."""
    if "custom_id" in line:
        resp = line.get("response") or {}
        return str(line["custom_id"]), resp.get("status_code"), resp.get("body"), line.get("error")
    if "recordId" in line:
        return _bedrock(line)
    return None


def _bedrock(line: dict[str, Any]) -> Line:
    rid, error = str(line["recordId"]), line.get("error")
    if error is not None or not isinstance(line.get("modelOutput"), dict):
        error = error if isinstance(error, dict) else {}
        code = error.get("errorCode")
        status = int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdigit()) else 500
        return rid, status, {"error": {"message": str(error.get("errorMessage") or "no modelOutput")}}, None
    out = line["modelOutput"]
    if "output" in out:  # Converse: {"output": {"message": {"content": [...]}}, "stopReason", "usage"}
        parts = ((out.get("output") or {}).get("message") or {}).get("content") or []
        texts = [p["text"] for p in parts if "text" in p]
        uses = [(u.get("toolUseId"), u.get("name"), u.get("input")) for p in parts
                if isinstance(u := p.get("toolUse"), dict)]
        usage = out.get("usage") or {}
        tokens = usage.get("inputTokens"), usage.get("outputTokens")
        stop = out.get("stopReason")
    else:  # Anthropic Messages: {"content": [...], "stop_reason", "usage"}
        parts = out.get("content") or []
        texts = [p.get("text", "") for p in parts if p.get("type") == "text"]
        uses = [(p.get("id"), p.get("name"), p.get("input")) for p in parts if p.get("type") == "tool_use"]
        usage = out.get("usage") or {}
        tokens = usage.get("input_tokens"), usage.get("output_tokens")
        stop = out.get("stop_reason")
    tools = [given for _id, name, given in uses if name in (None, JSON_TOOL)]  # JSON mode's answer, as a tool's input
    calls = [{"id": str(use_id or f"call_{n}"), "type": "function",
              "function": {"name": name, "arguments": json.dumps(given if given is not None else {})}}
             for n, (use_id, name, given) in enumerate(uses) if name not in (None, JSON_TOOL)]
    text = "".join(texts) or (json.dumps(tools[0]) if len(tools) == 1 else "")
    finish = {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls" if calls else "stop",
              "stop_sequence": "stop"}.get(stop, stop)
    message = {"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}
    body = {"object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}}
    return rid, 200, body, None
