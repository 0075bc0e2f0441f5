"""Prompt templates meet scenarios: `fill_prompt` fills a prompt with one scenario's fields, and
`check_placeholders` proves, before anything is called, that every prompt can be filled from
every scenario.

Templates follow ``str.format`` rules: ``{field}`` is a scenario's field and a literal brace is
written doubled (what a valid template is: `bench.config.entries.PromptEntry`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.config.entries import PromptEntry, template_fields
from bench.core.errors import ParamsError
from bench.core.records import Scenario


def fill_prompt(prompt: PromptEntry, scenario: Scenario) -> list[dict[str, str]]:
    """Return the OpenAI chat messages of a prompt filled with a scenario's fields.

    The messages are an optional ``system`` message, then the ``user`` message. Templates
    follow ``str.format`` rules: ``{field}`` is replaced by the field's text, and a
    literal brace is written doubled, ``{{`` or ``}}`` (``{{"a": {x}}}`` is filled as
    ``{"a": 1}`` for x = 1). A list value is joined with ``", "``, a dict value becomes
    compact JSON, anything else is ``str(value)``.
    """
    values = {name: _text(value) for name, value in scenario.fields.items()}
    messages = []
    for role, template in (("system", prompt.system), ("user", prompt.user)):
        if template is None:
            continue
        try:
            messages.append({"role": role, "content": template.format_map(values)})
        except KeyError as exc:
            raise ParamsError(f"prompt {prompt.key} uses {{{exc.args[0]}}}, which scenario {scenario.id} lacks "
                              f"(its fields: {', '.join(scenario.fields) or 'none'}); add the field to the "
                              f"scenarios or fix the template") from None
    return messages


def _text(value: Any) -> str:
    """Return the text a value takes in a template: lists joined by ", ", dicts as compact JSON."""
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value)


def check_placeholders(prompts: list[PromptEntry], scenarios: list[Scenario], params_path: Path) -> None:
    """Raise ParamsError, one line per problem, if a prompt needs a field some scenario lacks.

    Checked before any call, so a typo in a template cannot cost a sweep. Scenarios are
    grouped by their set of fields, so each distinct set is checked once.
    """
    groups: dict[tuple[str, ...], list[Any]] = {}  # field names → [first scenario, how many]
    for scenario in scenarios:
        group = groups.setdefault(tuple(sorted(scenario.fields)), [scenario, 0])
        group[1] += 1
    lines = []
    for prompt in prompts:
        names, problems = _template_names(prompt)
        lines += [f"{params_path}: prompt {prompt.key}: {p}" for p in problems]
        for name in sorted(names):
            lacking = [group for keys, group in groups.items() if name not in keys]
            if lacking:
                count = sum(n for _first, n in lacking)
                lines.append(_missing_line(params_path, prompt, name, lacking[0][0], count))
    if lines:
        raise ParamsError("\n".join(lines))


def _template_names(prompt: PromptEntry) -> tuple[set[str], list[str]]:
    """Return a prompt's placeholder names and what is wrong with its templates (if anything)."""
    problems = []
    for role, text in (("system", prompt.system or ""), ("user", prompt.user)):
        try:
            parsed = template_fields(text)
        except ValueError as exc:
            problems.append(f"invalid {role} template ({exc}); write a literal brace as {{{{ or }}}}")
            continue
        for name in parsed:
            if not name or name.isdigit() or "." in name or "[" in name:
                problems.append(f"the {role} template uses {{{name}}}; placeholders are field names like "
                                f"{{question}} (no positions, attributes or indexes); write a literal brace "
                                f"as {{{{ or }}}}")
    return (prompt.placeholders() if not problems else set()), problems


def _missing_line(params_path: Path, prompt: PromptEntry, name: str, first: Scenario, count: int) -> str:
    """Return the one-line report of a placeholder that ``count`` scenarios, ``first`` first, lack."""
    others = f" (and {count - 1} other scenarios)" if count > 1 else ""
    return (f"{params_path}: prompt {prompt.key} uses {{{name}}}, which scenario {first.id}{others} lacks "
            f"(its fields: {', '.join(first.fields) or 'none'}); add the field to the scenarios or fix "
            f"the template")
