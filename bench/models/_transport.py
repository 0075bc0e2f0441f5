"""One request sent (through ``bench.models._direct`` or ``litellm.acompletion``), its reply read into
``(text, usage, body)`` or its failure classified as a ProviderError; errors are redacted before being cut."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from typing import Any

import aiohttp

from bench.core.errors import ProviderError
from bench.core.secrets import add_secret, redact
from bench.core.http_get import basic_credentials
from bench.models._direct import Endpoint, Refused
from bench.models._json import body_bytes, loads
from bench.models._litellm import litellm
from bench.models.reasoning import billed_completion, plain, reasoning_tokens, separated, trim_logprobs
from bench.models.routing import Route

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
_KINDS = {400: "bad_request", 401: "auth", 403: "auth", 404: "not_found", 429: "rate_limit"}

Reply = tuple[str, dict[str, Any], dict | None]  # text, usage, the parsed provider body (direct transport)


def open_endpoint(route: Route, max_bytes: int, path: str = "chat/completions") -> Endpoint:
    """Return the HTTP endpoint of one route's ``path`` on this event loop (the key in its headers, in memory only;
    replies refused past ``max_bytes``); an api_base's ``user:password@`` goes as a Basic header, never with a key."""
    key = route.api_key()
    url, token = basic_credentials(f"{route.api_base}/{path}")
    if token is not None:
        if key:
            raise ProviderError(f"{route.spec.model}: api_base {route.api_base} carries credentials and the model has "
                                f"a key ({route.key_env}): one Authorization header carries one of them; drop the "
                                f"user:password@ or the key", kind="auth", retryable=False)
        add_secret(token)  # an error body that echoes the header is redacted like the password itself
        auth = f"Basic {token}"
    else:
        auth = f"Bearer {key or 'not-needed'}"
    try:
        return Endpoint(url, {"Content-Type": "application/json", "Accept": "application/json",
                              "Accept-Encoding": "identity",  # replies come whole (one that does not is read still)
                              "User-Agent": "bench", "Authorization": auth}, max_bytes)
    except ValueError as exc:  # not an http(s) URL, a line break in the key: no request can be sent
        raise ProviderError(f"{route.spec.model}: {exc}", kind="bad_request", retryable=False) from None


async def send_direct(endpoint: Endpoint, route: Route, body: dict, timeout_s: float, reached: set[str],
                      parse: Any = None) -> Reply:
    """POST one OpenAI-format request, its reply read by ``parse`` (``reached``: api_bases that answered)."""
    where = f"{route.spec.model} at {route.api_base}"
    try:
        status, headers, payload = await endpoint.post(body_bytes(body), timeout_s)
    except asyncio.TimeoutError:  # aiohttp's timeouts are TimeoutErrors too
        raise ProviderError(f"{where}: no answer within {timeout_s:g} s", kind="timeout", retryable=True) from None
    except aiohttp.ClientConnectorError as exc:  # refused, no such host, a proxy that does not answer, a certificate
        raise ProviderError(f"cannot connect to {route.api_base} for {route.spec.model}: {exc.os_error}; "
                            f"is the server running and the api_base right?", kind="connection",
                            retryable=route.api_base in reached) from None
    except Refused as exc:  # over the size bound, conflicting lengths, an unreadable coding: a retry pays again
        raise ProviderError(f"{where}: reply refused: {exc}", kind="malformed", retryable=False) from None
    except aiohttp.ClientResponseError as exc:  # aiohttp's parser refused the reply's head: not HTTP
        raise ProviderError(f"{where}: the reply is not HTTP/1.1 ({exc.message})".replace("\n", " "),
                            kind="malformed", retryable=False) from None
    except (aiohttp.ClientError, OSError) as exc:  # dropped before or during the reply, reset
        raise ProviderError(f"{where}: connection dropped ({type(exc).__name__}: {exc})", kind="connection",
                            retryable=True) from None
    reached.add(route.api_base)  # type: ignore[arg-type]
    if 300 <= status < 400 and headers.get("Location"):
        raise ProviderError(f"{where}: HTTP {status}: redirected to {headers['Location']}; set the api_base to "
                            f"where it points", kind="http", status=status, retryable=False)
    return (parse or parse_openai)(route, status, payload, headers.get("Retry-After") if status != 200 else None)


def parse_openai(route: Route, status: int, payload: bytes, retry_after: str | None) -> Reply:
    """Turn an OpenAI-format HTTP reply into (text, usage dict, body) or a ProviderError."""
    if status != 200:
        raise http_error(route, status, payload, retry_after)
    try:
        data = loads(payload)
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        snippet = redact(payload[:4096].decode("utf-8", "replace"))[:120]  # redacted before the cut: no half key
        raise ProviderError(f"{route.spec.model}: malformed reply body ({snippet!r})",
                            kind="malformed", retryable=True) from None
    u = data.get("usage") or {}
    usage = {"prompt_tokens": u.get("prompt_tokens"), "completion_tokens": u.get("completion_tokens"),
             "finish_reason": choice.get("finish_reason")}
    if calls := choice["message"].get("tool_calls"):  # the client takes them off (Completion.tool_calls)
        usage["tool_calls"] = wire_calls(calls)
    if u.get("prompt_tokens_details"):  # OpenAI's cached input (a dict per reply that has one)
        prompt_cache(u, usage)
    thinking = reasoning_tokens(u) if u.get("completion_tokens_details") else None  # most replies: none
    return thought_apart(route, text, choice["message"], usage, u.get("total_tokens"), thinking, data)


def http_error(route: Route, status: int, payload: bytes, retry_after: str | None) -> ProviderError:
    """Classify a non-200 reply: retryable (429, 5xx, …) or final (400, 401, 403, 404, …)."""
    try:
        detail = redact(str(json.loads(payload)["error"]["message"]))  # a gateway may echo the Authorization header
    except (ValueError, KeyError, TypeError):
        detail = redact(payload[:4096].decode("utf-8", "replace"))[:200]  # redacted before the cut: no half key
    kind = _KINDS.get(status, "server" if status >= 500 else "http")
    hint = {"auth": "; check the key variable", "not_found": "; check the model name and api_base"}.get(kind, "")
    return ProviderError(f"{route.spec.model} at {route.api_base}: HTTP {status}: {detail}{hint}",
                         kind=kind, status=status, retryable=status in RETRYABLE_STATUS,
                         retry_after=parse_retry_after(retry_after))


def token_logprobs(raw: dict[str, Any] | None) -> list | None:
    """Return a reply's token log-probabilities as ``[[token, [[alternative, logprob], …]], …]`` (OpenAI's
    ``choices[0].logprobs.content``, as OpenAI, vLLM and llama.cpp's server return it), or None without them."""
    try:
        logprobs = raw["choices"][0].get("logprobs") if raw else None  # type: ignore[index]
        if not logprobs:
            return None  # the common reply, none asked for: answered without raising and catching a KeyError
        return [[t["token"], [[a["token"], a["logprob"]] for a in t.get("top_logprobs") or []]
                 or [[t["token"], t["logprob"]]]] for t in logprobs["content"]] or None
    except (TypeError, KeyError, IndexError, AttributeError):
        return None


def parse_retry_after(value: str | None) -> float | None:
    """Return Retry-After in seconds (numeric or HTTP-date form), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time()) if when else None


async def send_litellm(route: Route, body: dict, timeout_s: float) -> Reply:
    """Send one request through ``litellm.acompletion`` (non-OpenAI wire formats)."""
    lm = litellm()
    kwargs = {k: v for k, v in body.items() if k not in ("model", "messages")}
    try:
        resp = await lm.acompletion(model=route.spec.model, messages=body["messages"], api_base=route.api_base
                                    if route.spec.api_base else None, api_key=route.api_key() or ("not-needed" if route.spec.api_base else None),
                                    timeout=timeout_s, num_retries=0, **kwargs)
    except Exception as exc:  # LiteLLM maps every provider error onto OpenAI's exception classes
        raise litellm_error(route, exc) from None
    choice = resp.choices[0]
    u = getattr(resp, "usage", None)
    usage = {"prompt_tokens": getattr(u, "prompt_tokens", None),
             "completion_tokens": getattr(u, "completion_tokens", None),
             "finish_reason": getattr(choice, "finish_reason", None)}
    if calls := getattr(choice.message, "tool_calls", None):  # LiteLLM's objects, as OpenAI's wire form
        usage["tool_calls"] = wire_calls(calls)
        if blocks := getattr(choice.message, "thinking_blocks", None):  # Anthropic's signed thinking, sent back with them
            usage["thinking_blocks"] = [b.model_dump() if hasattr(b, "model_dump") else dict(b) for b in blocks]
    if u is not None:
        prompt_cache(u, usage)
    return thought_apart(route, choice.message.content or "", choice.message, usage, getattr(u, "total_tokens", None),
                         reasoning_tokens(u), _logprobs_body(getattr(choice, "logprobs", None)))


def prompt_cache(u: Any, usage: dict[str, Any]) -> None:
    """Set ``cached_tokens`` and ``cache_write_tokens`` from a reply's usage (a dict or LiteLLM's object)."""
    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)

    details = get(u, "prompt_tokens_details")
    read = get(details, "cached_tokens") if details is not None else None
    write = get(details, "cache_creation_tokens") if details is not None else None
    read, write = read or get(u, "cache_read_input_tokens"), write or get(u, "cache_creation_input_tokens")
    if isinstance(read, int) and read > 0:
        usage["cached_tokens"] = read
    if isinstance(write, int) and write > 0:
        usage["cache_write_tokens"] = write


def wire_calls(calls: list[Any]) -> list[dict[str, Any]]:
    """Return a reply's tool calls (dicts or LiteLLM's objects) in OpenAI's wire form, arguments as written."""
    out = []
    for call in calls:
        plain = call.model_dump() if hasattr(call, "model_dump") else call
        if not isinstance(plain, dict):
            continue
        fn = plain.get("function") if isinstance(plain.get("function"), dict) else {}
        args = fn.get("arguments")
        out.append({"id": str(plain.get("id") or f"call_{len(out)}"), "type": "function",
                    "function": {"name": str(fn.get("name") or ""),
                                 "arguments": args if isinstance(args, str) else json.dumps(args or {})}})
    return out


def thought_apart(route: Route, text: str, message: Any, usage: dict[str, Any], total: int | None,
                  thinking_tokens: int | None, raw: dict | None) -> Reply:
    """Return the reply with its reasoning apart: under ``usage["reasoning"]``, its tokens ``reasoning_tokens``."""
    if not thinking_tokens and plain(text, message, route.spec.think_end):
        return text, usage, raw  # most replies: nothing to take apart
    answer, reasoning, offset = separated(text, message, route.spec.think_end)
    if offset:
        trim_logprobs(raw, offset)  # the logprobs read with the answer are the answer's alone
    if thinking_tokens:
        usage["reasoning_tokens"] = thinking_tokens
        usage["completion_tokens"] = billed_completion(usage["prompt_tokens"], usage["completion_tokens"], total,
                                                       thinking_tokens)
    if reasoning:
        usage["reasoning"] = reasoning
    return answer, usage, raw


def _logprobs_body(logprobs: Any) -> dict[str, Any] | None:
    """Return LiteLLM's (OpenAI-shaped) token logprobs of a choice as the part of a body ``token_logprobs`` reads."""
    if logprobs is None:
        return None
    plain = logprobs.model_dump() if hasattr(logprobs, "model_dump") else logprobs
    return {"choices": [{"logprobs": plain}]} if isinstance(plain, dict) else None


def litellm_error(route: Route, exc: Exception) -> ProviderError:
    """Classify a LiteLLM exception by its HTTP status (timeouts and connection errors retry)."""
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    text = redact(str(exc))  # LiteLLM copies the provider's error body, which may echo the key
    msg = f"{route.spec.model}: {name}: {text.splitlines()[0][:300] if text else ''}"
    if "Timeout" in name:
        return ProviderError(msg, kind="timeout", status=status, retryable=True)
    if "APIConnectionError" in name and status in (None, 500):
        return ProviderError(msg, kind="connection", status=status, retryable=True)
    kind = _KINDS.get(status or 0, "server" if (status or 0) >= 500 else "http")
    return ProviderError(msg, kind=kind, status=status, retryable=status in RETRYABLE_STATUS,
                         retry_after=parse_retry_after(headers.get("retry-after") if headers else None))


def storable(text: str) -> str:
    """Return ``text`` as valid Unicode: a lone surrogate becomes visible ``\\udcxx`` text (records stay writable)."""
    if text.isascii():
        return text  # the common reply: checked without a copy
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
