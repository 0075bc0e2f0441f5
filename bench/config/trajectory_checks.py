"""Trajectory checks: what an agent did, read from its recorded tool calls and requests (no model call).
A call refused before the tool ran counts only in ``tool_not_called``. Each scores 1 or 0."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from bench.config._strict import Strict
from bench.config.ids import SafeId

_SHOW = 40  # characters of an argument value quoted in a detail
REJECTED = frozenset({"malformed_arguments", "unknown_tool"})  # a call's outcomes where no tool ran (tool_runs)


@dataclass(frozen=True)
class Trajectory:
    """What trajectory checks read of one answer (or one turn of it): its tool calls in order, its tool-loop
    requests, and whether a trajectory was recorded at all (False: a plain answer, or a prompt without tools)."""

    calls: tuple[dict[str, Any], ...] = ()
    steps: int = 0
    recorded: bool = False

    @classmethod
    def of(cls, trajectory: Sequence[dict[str, Any]] | None, turns: Sequence[dict[str, Any]] | None,
           turn: int | None = None) -> "Trajectory":
        """Return the trajectory of a candidate's ``trajectory`` and ``turns`` (``turn``: that turn's only); its
        steps: the model's requests in turns that called a tool (none recorded: the requests that called tools)."""
        if trajectory is None:
            return cls()
        calls = tuple(c for c in trajectory if turn is None or c.get("turn") == turn)
        looped = {c.get("turn") for c in calls}
        requests = [t for t in turns or () if t.get("by", "model") == "model" and (turn is None or t.get("turn") == turn)]
        steps = sum(t.get("turn") in looped for t in requests) if requests else len({(c.get("turn"), c.get("step"))
                                                                                     for c in calls})
        return cls(calls, steps, True)

    @property
    def names(self) -> list[str]:
        """Return the called tools' names, in the order they were called."""
        return [str(c.get("name")) for c in self.calls]

    @property
    def accepted(self) -> list[dict[str, Any]]:
        """Return the calls the tools took (not ``REJECTED``: arguments malformed, or no such tool), in order."""
        return [c for c in self.calls if c.get("outcome") not in REJECTED]

    def none_called(self) -> str:
        """Return why no call is there: a plain answer, or a conversation that called no tool."""
        return ("no trajectory (a plain answer, or a prompt offering no tools): no tool was called"
                if not self.recorded else "no tool was called")


class _TrajectoryCheckBase(Strict):
    id: SafeId
    weight: float = Field(default=1.0, ge=0)


class ToolCalledCheck(_TrajectoryCheckBase):
    """Passes when the tool ``name`` was called (with ``arguments`` holding these values, or valid to ``schema``)."""

    kind: Literal["tool_called"]
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")

    @model_validator(mode="after")
    def _one_way(self) -> "ToolCalledCheck":
        if self.arguments is not None and self.json_schema is not None:
            raise ValueError(f"check '{self.id}': give arguments (values to match) or schema (a JSON schema the "
                             f"arguments must be valid against), not both")
        if self.json_schema is not None:
            problem = _schema_problem(self.json_schema)
            if problem:
                raise ValueError(f"check '{self.id}': schema is no valid JSON schema ({problem})")
        return self


class ToolOrderCheck(_TrajectoryCheckBase):
    """Passes when calls of the tools ``names`` came in this order (other calls may come between)."""

    kind: Literal["tool_order"]
    names: list[str] = Field(min_length=1)


class ToolNotCalledCheck(_TrajectoryCheckBase):
    """Passes when the tool ``name`` was never called."""

    kind: Literal["tool_not_called"]
    name: str = Field(min_length=1)


class MaxStepsCheck(_TrajectoryCheckBase):
    """Passes when the conversation's tool-loop requests number at most ``limit``."""

    kind: Literal["max_steps"]
    limit: int = Field(ge=1)


def run_trajectory_check(check: Any, trajectory: Trajectory | None) -> tuple[bool, str]:
    """Return (passed, detail) of a trajectory check on ``trajectory`` (None: a plain answer)."""
    return _RUNNERS[check.kind](check, trajectory or Trajectory())


def _tool_called(check: ToolCalledCheck, t: Trajectory) -> tuple[bool, str]:
    tried = [c for c in t.calls if c.get("name") == check.name]
    calls = [c for c in tried if c.get("outcome") not in REJECTED]
    if not calls:
        if tried:  # every call of it was refused before the tool ran: no call of the tool
            return False, f"{check.name} was called {_times(len(tried))}, each refused ({tried[-1].get('outcome')})"
        return False, f"{check.name} was not called ({_called(t)})"
    if check.arguments is None and check.json_schema is None:
        return True, f"{check.name} called {_times(len(calls))}"
    problems = []  # why each call does not match: a well-formed call's reason is the one shown
    for call in calls:
        args = call.get("arguments")
        if not isinstance(args, dict):
            problems.append("its arguments were malformed" if args is None else "its arguments are not an object")
            continue
        problem = _argument_problem(check.arguments, args) if check.arguments is not None else \
            _schema_error(check.json_schema or {}, args)
        if problem is None:
            return True, f"{check.name} called with matching arguments"
        problems.insert(0, problem)
    return False, f"{check.name} called {_times(len(calls))}, never with matching arguments: {problems[0]}"


def _tool_order(check: ToolOrderCheck, t: Trajectory) -> tuple[bool, str]:
    if not t.calls:
        return False, f"expected {' → '.join(check.names)}; {t.none_called()}"
    names, found = [str(c.get("name")) for c in t.accepted], 0  # a refused call is no call of the tool
    for name in names:
        if found < len(check.names) and name == check.names[found]:
            found += 1
    if found == len(check.names):
        return True, f"called in order: {' → '.join(check.names)}"
    after = f" after {' → '.join(check.names[:found])}" if found else ""
    return False, f"no call of {check.names[found]}{after} (calls: {', '.join(names)})"


def _tool_not_called(check: ToolNotCalledCheck, t: Trajectory) -> tuple[bool, str]:
    n = sum(c.get("name") == check.name for c in t.calls)
    if n:
        return False, f"{check.name} called {_times(n)}"
    return True, f"{check.name} not called ({_called(t)})"


def _max_steps(check: MaxStepsCheck, t: Trajectory) -> tuple[bool, str]:
    if not t.recorded:
        return True, f"{t.none_called()}: no tool-loop request"
    shown = f"{t.steps} tool-loop request{'s' if t.steps != 1 else ''}"
    return (True, f"{shown} ≤ {check.limit}") if t.steps <= check.limit else (False, f"{shown} > {check.limit}")


_RUNNERS: dict[str, Any] = {"tool_called": _tool_called, "tool_order": _tool_order,
                            "tool_not_called": _tool_not_called, "max_steps": _max_steps}
TRAJECTORY_KINDS: dict[str, type[_TrajectoryCheckBase]] = {
    "tool_called": ToolCalledCheck, "tool_order": ToolOrderCheck, "tool_not_called": ToolNotCalledCheck,
    "max_steps": MaxStepsCheck}


def _called(t: Trajectory) -> str:
    return f"calls: {', '.join(t.names)}" if t.calls else t.none_called()


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _argument_problem(expected: dict[str, Any], args: dict[str, Any]) -> str | None:
    """Return the first key of ``expected`` whose value ``args`` lacks, or None when every one matches."""
    for key, value in expected.items():
        if key not in args:
            return f"no argument {_quote(key)}"
        if not _same(args[key], value):
            return f"{key}={_quote(args[key])}, not {_quote(value)}"
    return None


def _same(a: Any, b: Any) -> bool:
    """Return whether two JSON values are equal as JSON reads them: 1 and 1.0 are, true and 1 are not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _schema_problem(schema: dict[str, Any]) -> str | None:
    """Return why ``schema`` is no JSON schema (under the draft it names, else 2020-12), or None."""
    import jsonschema  # noqa: PLC0415 - its import takes seconds (format checkers); only rubrics with a schema pay it

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return exc.message
    return None


def _schema_error(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """Return the first way ``args`` is invalid against ``schema``, or None when it is valid."""
    import jsonschema  # noqa: PLC0415 - its import takes seconds (format checkers); only rubrics with a schema pay it

    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(args))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"


def _quote(value: Any) -> str:
    """Return a value as JSON spells it (so false is not 0, nor "0"), cut to a few dozen characters."""
    s = json.dumps(value, ensure_ascii=False, default=str)
    s = s if len(s) <= _SHOW else s[:_SHOW] + "…"
    return s.encode("utf-8", "backslashreplace").decode("utf-8")
