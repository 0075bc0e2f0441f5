"""The preflight: before the first call, check every model of a run and report every problem at once.

It resolves each model string, checks that each needed key is in the environment (or
``.env``) and that each explicit ``api_base`` answers, and raises one PreflightError
listing everything that is wrong. Nothing is sent to a model, so nothing is spent.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from . import local
from ._litellm import litellm
from .errors import LocalModelError, PreflightError
from .routing import ModelSpec, resolve
from .secrets import load_env


def preflight(specs: Iterable[ModelSpec], *, probe_timeout_s: float = 3.0) -> None:
    """Return None when every model can be called; else raise PreflightError listing every problem."""
    load_env()
    specs = list(dict.fromkeys(specs))
    problems: list[str] = []
    for spec in specs:
        problems.extend(_check_model(spec))
    bases = sorted({s.api_base.rstrip("/") for s in specs if s.api_base})
    with ThreadPoolExecutor(max_workers=min(8, len(bases) or 1)) as pool:
        for problem in pool.map(lambda b: _probe(b, probe_timeout_s), bases):
            if problem:
                problems.append(problem)
    if problems:
        raise PreflightError(problems)


def _check_model(spec: ModelSpec) -> list[str]:
    """Return the problems of one model: unknown string, missing package or key."""
    if local.is_local(spec.model):
        return _check_local(spec)
    try:
        route = resolve(spec)
    except PreflightError as err:
        return err.problems
    if route.key_env:
        if not os.environ.get(route.key_env):
            return [f"model {spec.model!r} needs {route.key_env}: set it in the environment or in .env "
                    f"(see .env.example)"]
        return []
    if route.transport == "direct" or spec.api_base:
        return []  # a self-hosted OpenAI-compatible server: no key needed
    missing = litellm().validate_environment(spec.model).get("missing_keys") or []
    return [f"model {spec.model!r} needs {' or '.join(missing)}: set it in the environment or in .env "
            f"(see .env.example)"] if missing else []


def _check_local(spec: ModelSpec) -> list[str]:
    """Return the problems of an embedded model: missing server package, weights or size cap."""
    if os.environ.get("BENCH_LOCAL_API_BASE"):
        return []  # an already running `bench serve-local`; its reachability is checked on first use
    problems = []
    if importlib.util.find_spec("llama_cpp") is None:
        problems.append(f"model {spec.model!r} needs llama-cpp-python (the 'local' extra): "
                        f"run `make setup` or pip install -e '.[local]'")
    try:
        local.model_file(spec.model)
    except LocalModelError as err:
        problems.append(str(err))
    return problems


def _probe(api_base: str, timeout_s: float) -> str | None:
    """Return a problem if ``api_base`` does not answer HTTP at all (any HTTP status is an answer)."""
    try:
        urllib.request.urlopen(_get(f"{api_base}/models"), timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return None  # 401/404/… : something is listening and speaking HTTP
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            return f"api_base {api_base} refused the connection: is the server running, and is the port right?"
        if isinstance(reason, socket.gaierror):
            return f"api_base {api_base}: host not found ({reason.strerror}); check the address"
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return f"api_base {api_base} did not answer within {timeout_s:g} s"
        return f"api_base {api_base} is unreachable: {reason}"
    except (TimeoutError, socket.timeout):
        return f"api_base {api_base} did not answer within {timeout_s:g} s"
    except (OSError, ValueError) as exc:
        return f"api_base {api_base} is unreachable or malformed: {exc}"
    return None


def _get(url: str) -> urllib.request.Request:
    """Return a GET of ``url``, its credentials (``user:password@``) moved into a Basic header as HTTP
    clients send them: urllib would take ``user:password@host`` for a host name."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return urllib.request.Request(url)
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()).decode()
    return urllib.request.Request(parts._replace(netloc=host).geturl(), headers={"Authorization": f"Basic {token}"})
