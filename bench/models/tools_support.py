"""Tools through the one seam: tool definitions in the request key and body (OpenAI's form, never through
``routing.body_params``: LiteLLM would translate them twice), and the models refused tools before anything is sent."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError, ParamsError
from bench.models._litellm import litellm
from bench.models.providers import provider_for
from bench.models.routing import ModelSpec, Route


def with_tools(fields: dict[str, Any], tools: list[dict] | None, tool_choice: Any) -> dict[str, Any]:
    """Return a copy of a request's body (or its OpenAI-form params) with ``tools`` and ``tool_choice`` in it."""
    out = dict(fields)
    if tools:
        out["tools"] = tools
    if tool_choice is not None:
        out["tool_choice"] = tool_choice
    return out


def calls_text(usage: dict[str, Any]) -> str:
    """Return what a reply's tool calls wrote (names and arguments; "" without), to count tokens without usage."""
    calls = usage.get("tool_calls") or ()
    return " ".join(f"{c['function']['name']} {c['function']['arguments']}" for c in calls)


def tools_refusal(spec: ModelSpec) -> str | None:
    """Return why ``spec``'s model cannot be given tools, or None when it can or cannot be told before a call."""
    provider = provider_for(spec)
    try:
        route = provider.route(spec)
        if provider.takes_tools(route):
            return None
    except BenchError:
        return None
    if provider.in_model_map(route):
        said = _mapped(route)
        return (f"does not call functions: LiteLLM's model map says so for {said[0]} (supports_function_calling: "
                f"false)") if said is not None and said[1] is False else None
    if spec.api_base:
        return None
    return f"does not call functions: {provider.label or provider.name} is served without a function-calling format"


def _mapped(route: Route) -> tuple[str, Any] | None:
    """Return (the model map's entry name, its ``supports_function_calling`` as written), or None without entry."""
    cost = litellm().model_cost
    bare = route.spec.model.split("/", 1)[-1]
    for name in (route.spec.model, route.served_model, f"{route.vendor}/{route.served_model}", bare):
        entry = cost.get(name)
        if entry:
            return name, entry.get("supports_function_calling")
    return None


def check_tools(cells: Iterable[Any], params_path: Path) -> None:
    """Raise ParamsError, one line per model, when a prompt gives tools to a model known not to call them."""
    given: dict[str, tuple[Any, list[str]]] = {}
    for cell in cells:
        if getattr(cell.prompt, "tools", None):
            prompts = given.setdefault(cell.model.id, (cell.model, []))[1]
            if cell.prompt.id not in prompts:
                prompts.append(cell.prompt.id)
    lines = []
    for model, prompts in given.values():
        if why := tools_refusal(model.spec()):
            lines.append(f"{params_path}: model {model.id} ({model.model}) {why}, but prompt "
                         f"{', '.join(prompts)} gives it tools; leave it out of the grid (--cells), or give "
                         f"those prompts to a model that calls functions")
    if lines:
        raise ParamsError("\n".join(lines))
