"""One line of a batch's output or error file, read as OpenAI's ``(custom_id, status, body, error)``.

OpenAI, Azure, Mistral, xAI and Vertex (translated by LiteLLM) return OpenAI's output lines:
``{"custom_id", "response": {"status_code", "body"}, "error"}``. Bedrock's output file reaches us as
Bedrock wrote it (LiteLLM passes its content through): ``{"recordId", "modelInput", "modelOutput"}``
or ``{"recordId", "modelInput", "error": {"errorCode", "errorMessage"}}``, where ``modelOutput`` is
the model's InvokeModel reply: Anthropic's Messages format, or the Converse format of Nova and the
other Converse models. Those are turned into an OpenAI chat completion body here, so the queue
answers every provider's lines the same way. A JSON-mode answer given as a forced tool call
(``json_tool_call``) becomes the content, as LiteLLM does for a direct call.
"""

from __future__ import annotations

import json
from typing import Any

Line = tuple[str, int | None, Any, Any]  # custom_id, HTTP status, body, error


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
        tools = [p["toolUse"].get("input") for p in parts if "toolUse" in p]
        usage = out.get("usage") or {}
        tokens = usage.get("inputTokens"), usage.get("outputTokens")
        stop = out.get("stopReason")
    else:  # Anthropic Messages: {"content": [...], "stop_reason", "usage"}
        parts = out.get("content") or []
        texts = [p.get("text", "") for p in parts if p.get("type") == "text"]
        tools = [p.get("input") for p in parts if p.get("type") == "tool_use"]
        usage = out.get("usage") or {}
        tokens = usage.get("input_tokens"), usage.get("output_tokens")
        stop = out.get("stop_reason")
    text = "".join(texts) or (json.dumps(tools[0]) if len(tools) == 1 else "")
    finish = {"end_turn": "stop", "max_tokens": "length", "tool_use": "stop", "stop_sequence": "stop"}.get(stop, stop)
    body = {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                      "finish_reason": finish}],
            "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}}
    return rid, 200, body, None
