"""The fake provider's ``POST /v1/embeddings``: each input's hashed bag of words (bench._word_vectors), its words
billed as prompt tokens (no completion) like a chat reply."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from bench._word_vectors import word_count, word_vector


async def embed(server: Any, request: web.Request) -> web.Response:
    """Answer one embeddings request of ``server`` (a FakeServer), counted and billed, its knobs applied as chat's."""
    server.requests += 1
    server.embeddings += 1
    try:
        body = json.loads(await request.read())
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("input"), (str, list)):
        return server.error(400, "the request body must be a JSON object with input (a text or a list of texts)")
    server.by_model[body.get("model") or "fake-model"] += 1
    server.recent.append({**body, "_endpoint": "embeddings"})
    auth = request.headers.get("Authorization")
    await server.sleep()
    if server.auth_header is not None and auth != server.auth_header:
        return server.unauthorized(auth)
    if (refused := server.model_refusal(body)) is not None:
        return server.error(refused[0], refused[1]["error"]["message"])
    texts = [str(t) for t in (body["input"] if isinstance(body["input"], list) else [body["input"]])]
    tokens = sum(word_count(t) for t in texts)
    server.statuses[200] += 1
    server.bill({"prompt_tokens": tokens, "completion_tokens": 0})
    payload: dict[str, Any] = {"object": "list", "model": body.get("model") or "fake-model", "data": [
        {"object": "embedding", "index": i, "embedding": word_vector(t)} for i, t in enumerate(texts)]}
    if not server.config["omit_usage"]:
        payload["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
    return web.Response(text=json.dumps(payload), content_type="application/json")
