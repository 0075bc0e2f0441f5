"""The fake provider's aiohttp application: every route to its ``FakeServer`` (chat, native wires, embeddings, the
Batch API), and the model listings and admin endpoints, which only read or reset the server's state."""

from __future__ import annotations

import functools
import json

from aiohttp import web

from bench.testing.fake_provider import anthropic_wire, gemini_wire
from bench.testing.fake_provider.batch_routes import BatchRoutes
from bench.testing.fake_provider.embeddings import embed
from bench.testing.fake_provider.replies import error_body
from bench.testing.fake_provider.server import REQUEST_WIRE, FakeServer


async def models(server: FakeServer, request: web.Request) -> web.Response:
    """``GET /v1/models``: the ``served_models`` (none listed by default: any model is answered)."""
    if not server.config["list_models"]:
        return server.error(404, "this server does not list its models")
    served = server.config["served_models"] or []
    body = {"object": "list", "data": [{"id": m, "object": "model"} for m in served]}
    return web.Response(text=json.dumps(body), content_type="application/json")

async def gemini_models(server: FakeServer, request: web.Request) -> web.Response:
    """``GET /v1beta/models``: Gemini's listing of the ``served_models`` (a 403 without the ``require_key``)."""
    REQUEST_WIRE.set(gemini_wire)
    key = request.headers.get("x-goog-api-key") or request.query.get("key")
    if server.auth_header is not None and f"Bearer {key}" != server.auth_header:
        return server.error(403, "Method doesn't allow unregistered callers (fake provider)", count=False)
    if not server.config["list_models"]:
        return server.error(404, "this server does not list its models", count=False)
    return web.json_response({"models": [{"name": f"models/{m}"} for m in server.config["served_models"] or []]})

async def admin_config(server: FakeServer, request: web.Request) -> web.Response:
    """``POST /_admin/config``: merge the body over the config (``reset: true`` first restores defaults)."""
    try:
        update = json.loads(await request.read() or b"{}")
        if not isinstance(update, dict):
            raise ValueError("the config body must be a JSON object")
        return web.json_response(server.set_config(update, reset=bool(update.pop("reset", False))))
    except ValueError as exc:
        return web.Response(status=400, body=error_body(400, str(exc)), content_type="application/json")

async def admin_stats(server: FakeServer, request: web.Request) -> web.Response:
    """``GET /_admin/stats``."""
    return web.json_response(server.snapshot())

async def admin_timeline(server: FakeServer, request: web.Request) -> web.Response:
    """``GET /_admin/timeline``: each chat request's ``[model, start, end]`` since the last reset (timeline.py)."""
    return web.json_response(server.load.timeline())

async def admin_reset(server: FakeServer, request: web.Request) -> web.Response:
    """``POST /_admin/reset``: counters and config back to defaults; every file and batch dropped."""
    server.reset_counters()
    return web.json_response(server.set_config({}, reset=True))


def build_app(server: FakeServer) -> web.Application:
    """The aiohttp application routing every endpoint to ``server``."""
    app = web.Application(client_max_size=512 * 1024 * 1024)  # OpenAI's file size limit: batch_max_bytes can be hit
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/chat/completions", server.chat)
        app.router.add_post(f"{prefix}/embeddings", functools.partial(embed, server))
        app.router.add_get(f"{prefix}/models", functools.partial(models, server))
    for path in ("/v1/messages", "/v1/v1/messages"):  # an api_base ending in /v1 gets LiteLLM's /v1/messages added
        app.router.add_post(path, lambda request: server.chat(request, anthropic_wire))
    app.router.add_post("/v1beta/models/{model}:generateContent", lambda request: server.chat(request, gemini_wire))
    app.router.add_get("/v1beta/models", functools.partial(gemini_models, server))
    app.router.add_post("/_admin/config", functools.partial(admin_config, server))
    app.router.add_get("/_admin/stats", functools.partial(admin_stats, server))
    app.router.add_get("/_admin/timeline", functools.partial(admin_timeline, server))
    app.router.add_post("/_admin/reset", functools.partial(admin_reset, server))
    BatchRoutes(server.batches, server.batch_gate).add_to(app)
    return app
