"""The validation of a Batch API input file: its JSONL lines read into requests, or the errors that fail it
(OpenAI's error codes, ``line`` numbered from 1, null for the whole file). Standard library only."""

from __future__ import annotations

import json
from typing import Any

ENDPOINTS = ("/v1/chat/completions",)  # the batch endpoints the fake provider answers
WINDOW = "24h"  # the one completion window OpenAI accepts
REQUIRED = ("custom_id", "method", "url", "body")
MAX_ERRORS = 100  # errors listed per failed batch (the first ones)


def batch_error(code: str, message: str, line: int | None = None, param: str | None = None) -> dict[str, Any]:
    """One entry of a failed batch's ``errors.data``."""
    return {"code": code, "message": message, "param": param, "line": line}


def parse_lines(data: bytes, endpoint: str, max_requests: int, max_bytes: int) -> tuple[
        list[dict[str, Any]], list[dict[str, Any]]]:
    """The requests of an input file and the errors found in it (blank lines are skipped)."""
    if len(data) > max_bytes:
        return [], [batch_error("file_too_large", f"The input file is {len(data)} bytes, over the limit of "
                                                  f"{max_bytes} bytes per batch (batch_max_bytes).")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return [], [batch_error("invalid_file", "The input file is not UTF-8 text.")]
    requests: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    first_line: dict[str, int] = {}  # custom_id -> the line that used it first
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        request, error = check_line(raw, number, endpoint, first_line, requests[0] if requests else None)
        if error is not None:
            errors.append(error)
        elif request is not None:
            requests.append(request)
    if not requests and not errors:
        errors.append(batch_error("empty_file", "The input file holds no requests."))
    total = len(requests) + len(errors)
    if total > max_requests:
        errors.insert(0, batch_error("too_many_tasks", f"The input file holds {total} requests, over the limit of "
                                                       f"{max_requests} per batch (batch_max_requests)."))
    return requests, errors[:MAX_ERRORS]


def check_line(raw: str, number: int, endpoint: str, first_line: dict[str, int],
               first: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """One line read as a request, or the error it has; records its custom_id in ``first_line``."""
    try:
        request = json.loads(raw)
    except ValueError:
        request = None
    if not isinstance(request, dict):
        return None, batch_error("invalid_json_line", "This line is not parseable as valid JSON.", number)
    for key in REQUIRED:
        if key not in request:
            return None, batch_error("missing_required_parameter", f"Missing required parameter: '{key}'.",
                                     number, key)
    custom_id, body = request["custom_id"], request["body"]
    if not isinstance(custom_id, str) or not custom_id:
        return None, batch_error("invalid_value", "custom_id must be a non-empty string.", number, "custom_id")
    if request["method"] != "POST":
        return None, batch_error("invalid_value", f"Only the POST method is supported, got {request['method']!r}.",
                                 number, "method")
    if not isinstance(body, dict):
        return None, batch_error("invalid_value", "body must be a JSON object.", number, "body")
    if custom_id in first_line:
        message = f"The custom_id '{custom_id}' is not unique: line {first_line[custom_id]} already uses it."
        return None, batch_error("duplicate_custom_id", message, number, "custom_id")
    first_line[custom_id] = number
    if request["url"] != endpoint:
        return None, batch_error("url_mismatch", f"The url '{request['url']}' does not match the batch's endpoint "
                                                 f"'{endpoint}'.", number, "url")
    if first is not None and body.get("model") != first["body"].get("model"):
        return None, batch_error("model_mismatch", f"The model '{body.get('model')}' differs from the model "
                                                   f"'{first['body'].get('model')}' of the batch's first request; "
                                                   f"a batch holds one model.", number, "body.model")
    return request, None
