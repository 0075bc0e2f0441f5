"""A model's tool calls, executed: the result from ``tool_results``, else the Python ``function`` (cut at
``timeout_s``), else the ``result`` template; each failure is a recorded ``outcome``, never a crash."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.config.conversations import TOOL_NAME, ToolEntry
from bench.config.templates import TOOL_RESULTS, fill_result, text
from bench.core.errors import ParamsError
from bench.core.records import Scenario
from bench.core.secrets import redact

_REGISTERED: dict[str, Callable[..., Any]] = {}  # bench.register_tool: name → callable (this process)
_IMPORTED: dict[str, Callable[..., Any]] = {}  # "module:attr" → callable, imported once per process


def register_tool(name: str, fn: Callable[..., Any]) -> None:
    """Make ``fn`` the callable of every tool whose ``function`` is ``name`` (in this process)."""
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise ValueError(f"register_tool: {name!r} is not a tool function name (1–64 letters, digits, '_' or '-')")
    if not callable(fn):
        raise TypeError(f"register_tool: {name!r} must be given a callable, got {type(fn).__name__}")
    _REGISTERED[name] = fn


def check_functions(prompts: Iterable[Any], params_path: Path) -> None:
    """Raise ParamsError, a line per tool, when a tool's ``function`` cannot be found; before anything is sent."""
    lines, seen = [], set()
    for prompt in prompts:
        for tool in prompt.tool_entries:
            if tool.function is None or tool.name in seen:
                continue
            seen.add(tool.name)
            try:
                tool_function(tool.function, params_path.parent)
            except LookupError as exc:
                lines.append(f"{params_path}: prompt {prompt.key}: tool {tool.name}: {exc}")
    if lines:
        raise ParamsError("\n".join(lines))


def tool_function(spec: str, folder: Path | None = None) -> Callable[..., Any]:
    """Return the callable ``spec`` names (registered, or ``module:attr``); LookupError says why not."""
    if ":" not in spec:
        if spec not in _REGISTERED:
            raise LookupError(f"function {spec} is not registered in this process: call "
                              f"bench.register_tool({spec!r}, fn) before collecting, or give 'module:attr'")
        return _REGISTERED[spec]
    if spec not in _IMPORTED:
        _IMPORTED[spec] = _imported(spec, folder)
    return _IMPORTED[spec]


def _imported(spec: str, folder: Path | None) -> Callable[..., Any]:
    module_name, attr = spec.split(":", 1)
    added = folder is not None and str(folder) not in sys.path
    if added:
        sys.path.insert(0, str(folder))
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except Exception as exc:  # noqa: BLE001 (an ImportError, a missing attribute, or the module's own error)
        raise LookupError(f"function {spec} cannot be loaded ({type(exc).__name__}: {redact(str(exc))})") from None
    finally:
        if added:
            sys.path.remove(str(folder))
    if not callable(value):
        raise LookupError(f"function {spec} is a {type(value).__name__}, not a callable")
    return value


async def run_call(call: dict[str, Any], tools: tuple[ToolEntry, ...], scenario: Scenario, turn: int,
                   step: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (the tool message answering ``call``, its trajectory entry) for a call in OpenAI's wire form."""
    fn = call.get("function") if isinstance(call.get("function"), dict) else {}
    name, raw = str(fn.get("name") or ""), fn.get("arguments")
    raw = raw if isinstance(raw, str) else json.dumps(raw)
    args, problem = parsed_arguments(raw)
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        outcome, result = "unknown_tool", f"error: unknown tool {name!r}; available: {', '.join(t.name for t in tools)}"
    elif problem is not None or (problem := _missing(tool, args)) is not None:
        outcome, result = "malformed_arguments", f"error: {problem}; call {name} again with valid arguments"
    else:
        outcome, result = await tool_result(tool, args, scenario)
    message = {"role": "tool", "tool_call_id": call.get("id"), "name": name, "content": result}
    entry = {"turn": turn, "step": step, "id": call.get("id"), "name": name, "arguments": args,
             "raw_arguments": raw, "result": result, "outcome": outcome}
    return message, entry


def parsed_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """Return (the arguments a call's JSON text holds, None) or (None, what is wrong with it)."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        return None, f"the arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"the arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def _missing(tool: ToolEntry, args: dict[str, Any] | None) -> str | None:
    lacking = [name for name in tool.required() if name not in (args or {})]
    return f"missing required argument(s) {', '.join(lacking)}" if lacking else None


async def tool_result(tool: ToolEntry, args: dict[str, Any], scenario: Scenario) -> tuple[str, str]:
    """Return (outcome, result text) of a well-formed call: the scenario's override, the function, or the template."""
    overrides = scenario.fields.get(TOOL_RESULTS)
    if isinstance(overrides, dict) and tool.name in overrides:
        given = overrides[tool.name]
        return "ok", given if isinstance(given, str) else text(given)
    if tool.function is not None:
        return await _called(tool, args, scenario)
    try:
        return "ok", fill_result(tool, args, scenario)
    except KeyError as exc:
        return "malformed_arguments", f"error: {tool.name} needs the argument {exc.args[0]!r}; call it again with it"


async def _called(tool: ToolEntry, args: dict[str, Any], scenario: Scenario) -> tuple[str, str]:
    """Return (outcome, result text) of calling the tool's Python function with the call's arguments."""
    try:
        fn = tool_function(tool.function or "")
    except LookupError as exc:
        return "tool_error", f"error: tool {tool.name} cannot run: {exc}"
    kwargs, signature = dict(args), _signature(fn)
    if signature is not None and "scenario" in signature.parameters and "scenario" not in tool.argument_names():
        kwargs["scenario"] = dict(scenario.fields)
    try:
        if signature is not None:
            signature.bind(**kwargs)
    except TypeError as exc:
        return "malformed_arguments", f"error: the arguments do not fit {tool.name} ({exc}); call it again"
    try:
        value = await asyncio.wait_for(_running(fn, kwargs), tool.timeout_s)
    except (asyncio.TimeoutError, TimeoutError):
        return "timeout", f"error: tool {tool.name} did not answer within {tool.timeout_s:g} s"
    except Exception as exc:  # noqa: BLE001 (the tool's own failure is the model's to hear about, never a crash)
        return "tool_error", f"error: tool {tool.name} failed: {type(exc).__name__}: {redact(str(exc))}"
    return "ok", value if isinstance(value, str) else text(value)


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    """Return ``fn``'s signature, or None when Python cannot tell it (some builtins): then it is called as is."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _running(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Return an awaitable of ``fn(**kwargs)``: the coroutine, or a future a daemon thread settles (not waited for)."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):
        return fn(**kwargs)
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():
            return
        done.set_exception(error) if error is not None else done.set_result(value)

    def work() -> None:
        try:
            value, error = fn(**kwargs), None
        except BaseException as exc:  # noqa: BLE001 (handed to the awaiting task)
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the event loop ended meanwhile: nobody waits for this result any more
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="bench-tool", daemon=True).start()
    return done
