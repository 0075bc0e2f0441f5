"""The tools a params file declares (top-level ``tools:``), and the prompts that name them bound to them.
A tool's ``result`` template, or ``function`` callable, answers a call; a scenario's ``tool_results`` overrides."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from bench.config._strict import Strict
from bench.config.entries import PromptEntry, Template, template_fields

TOOL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")  # what providers accept as a function name (no dots)
_CALLABLE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")  # module:attr (attr may be dotted: Class.method)
DEFAULT_TIMEOUT_S = 10.0  # a Python tool that runs longer is cut off and recorded as a timeout


class ToolEntry(Strict):
    """One tool of the params file's ``tools:`` list."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    result: Template | None = None  # a template: the call's arguments, then the scenario's fields
    function: str | None = None  # "module:attr", or a name given to bench.register_tool
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=3600)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not TOOL_NAME.fullmatch(v):
            raise ValueError("must be 1–64 letters, digits, '_' or '-' (what providers accept as a function name)")
        return v

    @field_validator("function")
    @classmethod
    def _callable(cls, v: str | None) -> str | None:
        if v is not None and not (_CALLABLE.fullmatch(v) or TOOL_NAME.fullmatch(v)):
            raise ValueError(f"{v!r} is neither module:attr (a Python callable) nor a name registered with "
                             f"bench.register_tool")
        return v

    @field_validator("parameters")
    @classmethod
    def _schema(cls, v: dict[str, Any]) -> dict[str, Any]:
        problem = schema_problem(v)
        if problem:
            raise ValueError(f"must be the JSON schema of an object of arguments ({problem})")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> "ToolEntry":
        if self.result is not None and self.function is not None:
            raise ValueError(f"tool {self.name}: give result (a template) or function (a Python callable), not both")
        return self

    def definition(self) -> dict[str, Any]:
        """Return the tool as a request carries it (OpenAI's form, which LiteLLM translates for other providers)."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    def argument_names(self) -> set[str]:
        """Return the names of the tool's arguments (its schema's properties)."""
        return set(self.parameters.get("properties") or {})

    def required(self) -> list[str]:
        """Return the arguments a call must give (its schema's ``required``)."""
        return list(self.parameters.get("required") or [])

    def result_fields(self) -> set[str]:
        """Return the placeholders of ``result`` that no argument fills: each scenario must have them."""
        return set(template_fields(self.result or "")) - self.argument_names()


def schema_problem(schema: Any) -> str | None:
    """Return what keeps ``schema`` from being an object's JSON schema (a tool's ``parameters``), or None."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return 'its "type" must be "object"'
    props = schema.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(s, dict) for k, s in props.items()):
        return '"properties" must map each argument name to its schema'
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in props for r in required):
        return '"required" must list names of "properties"'
    return None


def bind_prompts(prompts: list[PromptEntry], tools: list[ToolEntry], seed: int) -> None:
    """Give each prompt its tools' ToolEntry and the sweep's ``seed``; ValueError naming a tool not among ``tools``."""
    by_name = {t.name: t for t in tools}
    for n, prompt in enumerate(prompts):
        unknown = [name for name in prompt.tools or () if name not in by_name]
        if unknown:
            declared = ", ".join(by_name) or "none (add a top-level tools: list)"
            raise ValueError(f"prompts[{n}] ({prompt.key}): tools: unknown tool {', '.join(map(repr, unknown))}; "
                             f"the params file's tools: {declared}")
        prompt._tool_entries = tuple(by_name[name] for name in prompt.tools or ())
        prompt._seed = seed
