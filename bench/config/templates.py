"""Prompt templates meet scenarios: `fill_prompt` fills a prompt with one scenario's fields, and
`check_placeholders` proves, before anything is called, that every prompt can be filled from every scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.config.conversations import ToolEntry
from bench.config.entries import PromptEntry, template_fields
from bench.core.errors import ParamsError
from bench.core.records import Scenario

TOOL_RESULTS = "tool_results"  # the scenario field overriding tools' results: {tool name: text | value}


def fill_prompt(prompt: PromptEntry, scenario: Scenario) -> list[dict[str, str]]:
    """Return the OpenAI chat messages of a prompt's first request, filled with a scenario's fields.
    ``str.format`` rules; a list is joined with ``", "``, a dict becomes compact JSON, anything else ``str(value)``."""
    values = field_values(scenario)
    messages = [] if prompt.system is None else [{"role": "system", "content": _fill(prompt.system, values, prompt,
                                                                                      scenario)}]
    if prompt.messages:
        return messages + [{"role": m.role, "content": _fill(m.content, values, prompt, scenario)}
                           for m in prompt.messages]
    first = prompt.user if prompt.user is not None else (prompt.turns or [""])[0]
    return messages + [{"role": "user", "content": _fill(first, values, prompt, scenario)}]


def later_turns(prompt: PromptEntry, scenario: Scenario) -> list[str]:
    """Return the user turns of a ``turns`` script after the first, filled (none for any other prompt)."""
    values = field_values(scenario)
    return [_fill(t, values, prompt, scenario) for t in (prompt.turns or [])[1:]]


def fill_instructions(prompt: PromptEntry, scenario: Scenario) -> str:
    """Return the system message of a prompt's simulated user: its instructions filled with the scenario's fields."""
    assert prompt.user_simulator is not None
    return _fill(prompt.user_simulator.instructions, field_values(scenario), prompt, scenario)


def fill_result(tool: ToolEntry, arguments: dict[str, Any], scenario: Scenario) -> str:
    """Return a tool's ``result`` filled from the call's ``arguments``, then the scenario's fields; else KeyError."""
    return (tool.result or "").format_map({**field_values(scenario), **{k: text(v) for k, v in arguments.items()}})


def field_values(scenario: Scenario) -> dict[str, str]:
    """Return a scenario's fields as the text templates show them."""
    return {name: text(value) for name, value in scenario.fields.items()}


def _fill(template: str, values: dict[str, str], prompt: PromptEntry, scenario: Scenario) -> str:
    try:
        return template.format_map(values)
    except KeyError as exc:
        raise ParamsError(f"prompt {prompt.key} uses {{{exc.args[0]}}}, which scenario {scenario.id} lacks "
                          f"(its fields: {', '.join(scenario.fields) or 'none'}); add the field to the "
                          f"scenarios or fix the template") from None


def text(value: Any) -> str:
    """Return the text a value takes in a template: lists joined by ", ", dicts as compact JSON."""
    if isinstance(value, (list, tuple)):
        return ", ".join(text(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value)


def check_placeholders(prompts: list[PromptEntry], scenarios: list[Scenario], params_path: Path) -> None:
    """Raise ParamsError, one line per problem, if a prompt needs a field some scenario lacks."""
    groups: dict[tuple[Any, ...], list[Any]] = {}  # field names, overridden tools → [first scenario, how many]
    for scenario in scenarios:
        group = groups.setdefault(_shape(scenario), [scenario, 0])
        group[1] += 1
    lines = []
    for prompt in prompts:
        names, problems = _template_names(prompt)
        lines += [f"{params_path}: prompt {prompt.key}: {p}" for p in problems]
        for name in sorted(names):
            lacking = [group for (keys, _tools), group in groups.items() if name not in keys]
            if lacking:
                count = sum(n for _first, n in lacking)
                lines.append(_missing_line(params_path, prompt, name, lacking[0][0], count))
        lines += _tool_lines(prompt, groups, params_path) if prompt.tools else []
    if lines:
        raise ParamsError("\n".join(lines))


def _shape(scenario: Scenario) -> tuple[Any, ...]:
    """Return what placeholders depend on in a scenario: its field names, and the tools its tool_results names."""
    given = scenario.fields.get(TOOL_RESULTS)
    tools = tuple(sorted(given)) if isinstance(given, dict) else None if given is None else "not a mapping"
    return tuple(sorted(scenario.fields)), tools


def _tool_lines(prompt: PromptEntry, groups: dict[tuple[Any, ...], list[Any]], params_path: Path) -> list[str]:
    """Return one line per tool result of ``prompt`` some scenarios cannot fill (nor override)."""
    lines = []
    for (keys, overridden), (first, count) in groups.items():
        if overridden == "not a mapping":
            lines.append(f"{params_path}: scenario {first.id}: {TOOL_RESULTS} must map tool names to results, "
                         f"got {type(first.fields[TOOL_RESULTS]).__name__}")
            continue
        for tool in prompt.tool_entries:
            if tool.name in (overridden or ()):
                continue
            others = f" (and {count - 1} other scenarios)" if count > 1 else ""
            if tool.result is None and tool.function is None:
                lines.append(f"{params_path}: prompt {prompt.key}: tool {tool.name} has no result or function, and "
                             f"scenario {first.id}{others} gives none in {TOOL_RESULTS}")
            lines += [f"{params_path}: prompt {prompt.key}: tool {tool.name}'s result uses {{{name}}}, which is no "
                      f"argument of the tool and scenario {first.id}{others} lacks; add the field, or "
                      f"{TOOL_RESULTS}.{tool.name} to the scenario" for name in sorted(tool.result_fields() - set(keys))]
    return lines


def _template_names(prompt: PromptEntry) -> tuple[set[str], list[str]]:
    """Return a prompt's placeholder names and what is wrong with its templates (if anything)."""
    problems = []
    for where, template in prompt.templates():
        try:
            parsed = template_fields(template)
        except ValueError as exc:
            problems.append(f"invalid {where} template ({exc}); write a literal brace as {{{{ or }}}}")
            continue
        for name in parsed:
            if not name or name.isdigit() or "." in name or "[" in name:
                problems.append(f"the {where} template uses {{{name}}}; placeholders are field names like "
                                f"{{question}} (no positions, attributes or indexes); write a literal brace "
                                f"as {{{{ or }}}}")
    return (prompt.placeholders() if not problems else set()), problems


def _missing_line(params_path: Path, prompt: PromptEntry, name: str, first: Scenario, count: int) -> str:
    """Return the one-line report of a placeholder that ``count`` scenarios, ``first`` first, lack."""
    others = f" (and {count - 1} other scenarios)" if count > 1 else ""
    return (f"{params_path}: prompt {prompt.key} uses {{{name}}}, which scenario {first.id}{others} lacks "
            f"(its fields: {', '.join(first.fields) or 'none'}); add the field to the scenarios or fix "
            f"the template")
