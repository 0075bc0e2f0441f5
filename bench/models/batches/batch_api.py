"""A provider's Files + Batch API through LiteLLM (upload, create, poll, read files); an ``api_base`` is reached at
``/files`` and ``/batches``; every failure comes back as a redacted ProviderError."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bench.core.errors import ProviderError
from bench.models._litellm import litellm
from bench.models._transport import RETRYABLE_STATUS, http_error, litellm_error
from bench.models.providers import Route, batch_vendors

ENDPOINT = "/v1/chat/completions"
TERMINAL = ("completed", "failed", "expired", "cancelled")


def provider_of(route: Route) -> str | None:
    """Return the LiteLLM provider that batches ``route``'s requests, or None when it has no Batch API."""
    return route.provider.batch_vendor(route)


@dataclass
class BatchState:
    """What a provider says of one batch."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[str] | None = None  # why a batch failed validation, one line each
    metadata: dict[str, str] | None = None
    input_file_id: str | None = None
    created_at: int | None = None  # the provider's clock, seconds since the epoch

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


class BatchApi:
    """One route's Files + Batch API calls (the key read from its variable per call, never stored)."""

    def __init__(self, route: Route):
        self.route = route
        self.provider = provider_of(route)

    def _kw(self) -> dict[str, Any]:
        # max_retries=0: the SDK retrying a create whose reply was lost would start a second batch (bench looks it up)
        kw: dict[str, Any] = {"custom_llm_provider": self.provider, "max_retries": 0}
        if self.provider != "openai":  # Bedrock and Mistral load their batch config from the model
            kw["model"] = self.route.spec.model
        if self.route.api_base:
            kw["api_base"] = self.route.api_base
        key = self.route.api_key() or ("not-needed" if self.route.spec.api_base else None)
        if key:
            kw["api_key"] = key
        return kw

    async def _call(self, name: str, **kw: Any) -> Any:
        """Return LiteLLM's ``name`` call's answer; its failure as a redacted ProviderError."""
        try:
            return await getattr(litellm(), name)(**kw, **self._kw())
        except Exception as exc:
            raise litellm_error(self.route, exc) from None

    async def upload(self, name: str, data: bytes) -> str:
        """Upload one batch's JSONL; return the file id."""
        return (await self._call("acreate_file", file=(name, data, "application/jsonl"), purpose="batch")).id

    async def create(self, file_id: str, window: str, metadata: dict[str, str]) -> BatchState:
        return state_of(await self._call("acreate_batch", completion_window=window, endpoint=ENDPOINT,
                                         input_file_id=file_id, metadata=metadata))

    async def retrieve(self, batch_id: str) -> BatchState:
        return state_of(await self._call("aretrieve_batch", batch_id=batch_id))

    async def cancel(self, batch_id: str) -> BatchState:
        return state_of(await self._call("acancel_batch", batch_id=batch_id))

    async def content(self, file_id: str) -> bytes:
        """Return a file's bytes (a batch's output or error file)."""
        resp = await self._call("afile_content", file_id=file_id)
        return resp.content if hasattr(resp, "content") else bytes(resp)

    async def recent(self, since: float, pages: int = 50) -> list[BatchState]:
        """Return every batch listed as created at or after ``since`` (epoch seconds), newest first; ProviderError
        (``batch_lookup_incomplete``) when ``pages`` pages of 100 did not reach it ("not listed" is not "absent")."""
        after, found = None, []
        for _ in range(pages):
            page = await self._call("alist_batches", after=after, limit=100)
            data = [state_of(obj) for obj in
                    list(getattr(page, "data", None) or (page.get("data") if isinstance(page, dict) else []) or [])]
            found += [s for s in data if s.created_at is None or s.created_at >= since]
            if not data or not _get(page, "has_more") or any(s.created_at is not None and s.created_at < since
                                                              for s in data):
                return found
            after = data[-1].id
        raise ProviderError(f"{self.route.spec.model}: the provider's batch list holds more than {pages * 100} "
                            f"batches since the one looked for was submitted; it was not read to the end",
                            kind="batch_lookup_incomplete", retryable=False)


async def close_clients() -> None:
    """Close and forget the HTTP clients LiteLLM cached for the running loop's files/batches calls."""
    from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients  # noqa: PLC0415 (LiteLLM internals, loaded only by a batched model)

    lm = litellm()
    await close_litellm_async_clients()
    lm.in_memory_llm_clients_cache.flush_cache()


def state_of(obj: Any) -> BatchState:
    """Return the BatchState of a LiteLLM batch object (or a plain dict of OpenAI's batch fields)."""
    counts = _get(obj, "request_counts")
    errors = _get(obj, "errors")
    lines = None
    if errors is not None:
        lines = [f"line {_get(e, 'line')}: {_get(e, 'code')}: {_get(e, 'message')}" if _get(e, "line") is not None
                 else f"{_get(e, 'code')}: {_get(e, 'message')}" for e in (_get(errors, "data") or [])]
    return BatchState(id=str(_get(obj, "id")), status=str(_get(obj, "status")),
                      total=int(_get(counts, "total") or 0), completed=int(_get(counts, "completed") or 0),
                      failed=int(_get(counts, "failed") or 0), output_file_id=_get(obj, "output_file_id"),
                      error_file_id=_get(obj, "error_file_id"), errors=lines,
                      metadata=dict(_get(obj, "metadata") or {}), input_file_id=_get(obj, "input_file_id"),
                      created_at=_int(_get(obj, "created_at")))


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def line_body(route: Route, body: dict[str, Any], params: dict[str, Any], response_format: dict | None) -> dict[str, Any]:
    """Return the body of ``route``'s batch line: OpenAI's chat request, which LiteLLM's files API translates."""
    if route.transport != "litellm":
        return body
    params = dict(params)
    passed = params.pop("extra_body", None) or {}
    name = litellm().get_llm_provider(route.spec.model)[0]
    out = {"model": name, "messages": body["messages"], **params, **passed}
    if response_format is not None:
        out["response_format"] = response_format
    return out


def jsonl_line(custom_id: str, body: dict[str, Any]) -> bytes:
    """Return one request of a batch file (OpenAI's format, which LiteLLM translates for other providers)."""
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body},
                      ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def unsupported(route: Route) -> str | None:
    """Return why LiteLLM cannot batch ``route``'s requests (one actionable line), or None when it can."""
    if provider_of(route) is not None:
        return None
    what = route.provider.label or route.vendor
    return (f"model {route.spec.model!r}: {what} has no Batch API that LiteLLM supports (it batches for: "
            f"{', '.join(sorted(batch_vendors()))}); drop `batch:` for it")


def line_error(route: Route, status: int | None, body: Any, error: Any) -> ProviderError:
    """Return the ProviderError of one failed line of a batch's error file (retryable like the direct call)."""
    if status:
        err = http_error(route, int(status), json.dumps(body or {}).encode(), None)
        return ProviderError(f"{err} (in a batch)", kind=err.kind, status=err.status,
                             retryable=int(status) in RETRYABLE_STATUS)
    code, message = _get(error, "code") or "error", _get(error, "message") or ""
    expired = code == "batch_expired"
    return ProviderError(f"{route.spec.model}: batch line {code}: {message}".rstrip(": "),
                         kind="batch_expired" if expired else "batch_error", retryable=True)
