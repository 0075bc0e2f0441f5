"""The fake provider's Files and Batch API routes, in OpenAI's wire format, over a :class:`BatchStore`: each asks the
server's ``gate`` (``batches_supported``, ``require_key``), then ``batch_route_fail``; none counts as a chat request."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bench.testing.fake_provider.batches import BatchStore, Refusal
from bench.testing.fake_provider.replies import error_body

Gate = Callable[[web.Request], "web.Response | None"]
Handler = Callable[[web.Request], Awaitable[web.Response]]


def refused(refusal: Refusal) -> web.Response:
    """The OpenAI error response for a refusal."""
    return web.Response(status=refusal.status, body=error_body(refusal.status, refusal.message, refusal.code),
                        content_type="application/json")


class BatchRoutes:
    """The aiohttp handlers of the Files and Batch API."""

    def __init__(self, store: BatchStore, gate: Gate) -> None:
        self.store = store
        self.gate = gate

    def add_to(self, app: web.Application) -> None:
        """Route every files/batches endpoint, with and without the ``/v1`` prefix."""
        routes: list[tuple[str, str, Callable[[web.Request], Any]]] = [
            ("POST", "/files", self.upload), ("GET", "/files/{file_id}", self.get_file),
            ("GET", "/files/{file_id}/content", self.content), ("DELETE", "/files/{file_id}", self.delete_file),
            ("POST", "/batches", self.create), ("GET", "/batches", self.list_batches),
            ("GET", "/batches/{batch_id}", self.get_batch), ("POST", "/batches/{batch_id}/cancel", self.cancel),
        ]
        for method, path, call in routes:
            handler = self.guarded(call, call.__name__)
            app.router.add_route(method, f"/v1{path}", handler)
            app.router.add_route(method, path, handler)

    def guarded(self, call: Callable[[web.Request], Any], name: str) -> Handler:
        """``call`` behind the gate and ``batch_route_fail``, its Refusals and results answered as JSON."""
        async def handler(request: web.Request) -> web.Response:
            closed = self.gate(request)
            if closed is not None:
                return closed
            if self.store.route_fault(name):
                return refused(Refusal(503, f"the fake provider failed {request.method} {request.path} "
                                            f"(batch_route_fail)", "server_error"))
            try:
                result = await call(request)
            except Refusal as refusal:
                return refused(refusal)
            if name == "create" and self.store.route_fault("create_lost"):
                return refused(Refusal(503, "the batch was created, but this reply was lost (batch_route_fail)",
                                       "server_error"))
            return result if isinstance(result, web.Response) else web.json_response(result)
        return handler

    async def upload(self, request: web.Request) -> dict[str, Any]:
        """``POST /files``: store the multipart ``file`` under its ``purpose``."""
        if not request.content_type.startswith("multipart/"):
            raise Refusal(400, "POST /files takes multipart/form-data with the fields 'purpose' and 'file'")
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, web.FileField):
            raise Refusal(400, "Missing required parameter: 'file' (a file part of the form).")
        if not isinstance(purpose, str) or not purpose:
            raise Refusal(400, "Missing required parameter: 'purpose'.")
        return self.store.add_file(upload.filename or "upload", purpose, upload.file.read()).to_json()

    async def get_file(self, request: web.Request) -> dict[str, Any]:
        """``GET /files/{id}``: the file object."""
        return self.store.file(request.match_info["file_id"]).to_json()

    async def content(self, request: web.Request) -> web.Response:
        """``GET /files/{id}/content``: the file's bytes."""
        stored = self.store.file(request.match_info["file_id"])
        return web.Response(body=stored.data, content_type="application/octet-stream")

    async def delete_file(self, request: web.Request) -> dict[str, Any]:
        """``DELETE /files/{id}``."""
        return self.store.delete_file(request.match_info["file_id"])

    async def create(self, request: web.Request) -> dict[str, Any]:
        """``POST /batches``: ``input_file_id``, ``endpoint``, ``completion_window``, optional ``metadata``."""
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise Refusal(400, "the request body must be a JSON object")
        return self.store.create(body.get("input_file_id"), body.get("endpoint"), body.get("completion_window"),
                                 body.get("metadata")).to_json()

    async def list_batches(self, request: web.Request) -> dict[str, Any]:
        """``GET /batches?limit=&after=``: newest first."""
        return self.store.page(request.query.get("limit"), request.query.get("after"))

    async def get_batch(self, request: web.Request) -> dict[str, Any]:
        """``GET /batches/{id}``."""
        return self.store.get(request.match_info["batch_id"]).to_json()

    async def cancel(self, request: web.Request) -> dict[str, Any]:
        """``POST /batches/{id}/cancel``."""
        return self.store.cancel(request.match_info["batch_id"]).to_json()
