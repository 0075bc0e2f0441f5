"""The preflight: before the first call, check every model of a run and report every problem at once (each model
resolves, its keys are set, an explicit ``api_base`` answers); nothing is sent to a model."""

from __future__ import annotations

import json
import socket
import urllib.error
import warnings
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from bench.core.errors import PreflightError
from bench.core.http_get import get
from bench.core.secrets import load_env
from bench.models.batches.batch_api import provider_of, unsupported
from bench.models.providers import provider_for
from bench.models.routing import ModelSpec, resolve


def preflight(specs: Iterable[ModelSpec], *, probe_timeout_s: float = 3.0) -> None:
    """Return None when every model can be called; else raise PreflightError listing every problem."""
    load_env()
    specs = list(dict.fromkeys(specs))
    problems: list[str] = []
    for spec in specs:
        problems.extend(provider_for(spec).check(spec))
    listings = {provider_for(s).listing(s): s.api_base.rstrip("/") for s in specs  # where each api_base lists its
                if s.api_base and provider_for(s).probes_api_base}  # models (Anthropic's and Gemini's differ)
    with ThreadPoolExecutor(max_workers=min(8, len(listings) or 1)) as pool:
        served: dict[str, set[str]] = {}
        for url, (problem, listed) in zip(listings, pool.map(lambda u: _probe(u, listings[u], probe_timeout_s),
                                                              listings)):
            if problem:
                problems.append(problem)
            if listed:
                served[url] = listed
    problems.extend(_unknown_models(specs, served))
    if not problems:  # a batched model: its provider, or its api_base, must have a Batch API
        problems.extend(p for spec in specs if spec.batch is not None and (p := _check_batches(spec, probe_timeout_s)))
    if problems:
        raise PreflightError(problems)


def _unknown_models(specs: list[ModelSpec], served: dict[str, set[str]]) -> list[str]:
    """Return a problem for each model an ``api_base`` does not list among the models it serves."""
    problems = []
    for spec in specs:
        listed = served.get(provider_for(spec).listing(spec)) if spec.api_base else None
        if not listed or not provider_for(spec).named_in_listing:
            continue
        name = spec.model.split("/", 1)[1] if "/" in spec.model else spec.model
        if name not in listed and spec.model not in listed:
            shown = ", ".join(sorted(listed)[:8]) + (", …" if len(listed) > 8 else "")
            problems.append(f"model {spec.model!r}: {spec.api_base} does not serve {name!r} (it lists: {shown}); "
                            f"fix the model name")
    return problems


def _check_batches(spec: ModelSpec, timeout_s: float) -> str | None:
    """Return why a batched model's requests cannot go through a Batch API, or None."""
    route = resolve(spec)
    if route.provider.answers_in_process:
        return None  # a dry run probes nothing
    if (problem := unsupported(route)) or not spec.api_base or provider_of(route) != "openai":
        return problem  # an api_base of another provider (Azure's deployment URL) is LiteLLM's to address
    bearer = {"Authorization": f"Bearer {route.api_key() or 'not-needed'}"}  # the api_base's credentials win
    headers = {} if "@" in urlsplit(route.api_base).netloc else bearer
    try:
        status, answer, _ = get(f"{route.api_base}/batches?limit=1", timeout_s=timeout_s, headers=headers)
    except (urllib.error.URLError, TimeoutError, socket.timeout, OSError, ValueError) as exc:
        return _unreachable(route.api_base or "", exc, timeout_s)
    if status in (404, 405, 501):
        return (f"model {spec.model!r} has `batch:` but {route.api_base} has no Batch API (GET /batches "
                f"answered {status}); drop `batch:` for it, or use a server with /v1/files and /v1/batches")
    if status in (401, 403):
        return f"model {spec.model!r}: {route.api_base}/batches refused the key (HTTP {status}); check {route.key_env}"
    return _redirected(route.api_base or "", status, answer)


def _probe(url: str, api_base: str, timeout_s: float) -> tuple[str | None, set[str]]:
    """Return (a problem if ``api_base`` does not answer HTTP or redirects, the model ids it lists at ``url``)."""
    try:
        status, headers, body = get(url, timeout_s=timeout_s)
    except (urllib.error.URLError, TimeoutError, socket.timeout, OSError, ValueError) as exc:
        return _unreachable(api_base, exc, timeout_s), set()
    if status == 200:
        return None, _listed(body)
    if status in (401, 403):
        warnings.warn(f"preflight: {url} lists its models only to a caller with a key (HTTP {status}): {api_base} "
                      f"answers, but its model names are checked by the first request, not before", stacklevel=3)
    return _redirected(api_base, status, headers), set()  # 401/404/… : something is listening and speaking HTTP


def _redirected(api_base: str, status: int, headers: object) -> str | None:
    """Return the problem of an ``api_base`` that redirects (the seam follows no redirect either), else None."""
    where = headers.get("Location") if 300 <= status < 400 and headers is not None else None  # type: ignore[attr-defined]
    if where is None:
        return None
    return f"api_base {api_base} redirects to {where} (HTTP {status}); set the api_base to where it points"


def _listed(body: bytes) -> set[str]:
    """Return the model ids of an OpenAI-style or Gemini ``/models`` listing (empty when it is neither)."""
    try:
        found = json.loads(body)
        data = found.get("data") or found.get("models")
        ids = [m.get("id") or str(m.get("name") or "").removeprefix("models/") for m in data if isinstance(m, dict)]
        return {str(i) for i in ids if i} if isinstance(data, list) else set()
    except (ValueError, AttributeError, TypeError):
        return set()


def _unreachable(api_base: str, exc: BaseException, timeout_s: float) -> str:
    """Return the one-line problem of an ``api_base`` that did not answer."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ConnectionRefusedError):
        return f"api_base {api_base} refused the connection: is the server running, and is the port right?"
    if isinstance(reason, socket.gaierror):
        return f"api_base {api_base}: host not found ({reason.strerror}); check the address"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"api_base {api_base} did not answer within {timeout_s:g} s"
    if isinstance(exc, urllib.error.URLError):
        return f"api_base {api_base} is unreachable: {reason}"
    return f"api_base {api_base} is unreachable or malformed: {exc}"
