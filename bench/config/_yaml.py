"""Safe YAML for params files and rubric front matter: no repeated keys, no alias bombs, errors with lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bench.core.errors import ParamsError

MAX_ALIAS_VALUES = 200_000  # values YAML aliases may add by expansion: far above any real grid, far below a bomb
_ENDLESS = 10**12


class DuplicateKeyError(yaml.YAMLError):
    """A mapping lists the same key twice (YAML would silently keep the last)."""

    def __init__(self, key: Any, line: int):
        super().__init__(f"duplicate key '{key}'")
        self.key, self.line = key, line


class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A safe loader that refuses a key repeated in one mapping (``<<`` merges may still be overridden)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """Return the mapping of ``node``, raising DuplicateKeyError on a repeated key."""
        seen: set[Any] = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise DuplicateKeyError(key, key_node.start_mark.line + 1)
                seen.add(key)
            except TypeError:
                continue  # an unhashable key: SafeLoader reports it
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: Path, text: str, kind: str = "params file") -> Any:
    """Return the parsed YAML of ``text`` (from ``path``, a ``kind`` of file); refuse a repeated key and aliases adding
    more than MAX_ALIAS_VALUES values (a "billion laughs" bomb) before building anything."""
    loader = UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        memo: dict[int, int] = {}
        if _expanded_size(node, memo) - len(memo) > MAX_ALIAS_VALUES:
            raise ParamsError(f"{path}: its aliases (&name / *name) expand to more than {MAX_ALIAS_VALUES:,} "
                              f"values; a {kind} never needs that many: remove the aliases")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def parse_yaml(path: Path, text: str, kind: str = "params file", first_line: int = 1, part: str = "") -> Any:
    """Return the parsed YAML of ``text``; a ParamsError naming ``path`` and the line if it is invalid.
    ``first_line``: the file's line where ``text`` starts; ``part`` names that part in the message."""
    try:
        return load_yaml(path, text, kind)
    except DuplicateKeyError as exc:  # its line is 1-based within ``text``
        raise ParamsError(f"{path}:{exc.line + first_line - 1}: {exc}") from None
    except RecursionError:
        raise ParamsError(f"{path}: the YAML is nested too deeply to be a {kind}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + first_line}:{mark.column + 1}" if mark else ""
        raise ParamsError(f"{path}{where}: invalid YAML{part} ({getattr(exc, 'problem', None) or exc})") from None


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Return how many values ``node`` becomes once every alias is expanded, in time linear in its distinct nodes."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = _ENDLESS  # a cycle (a recursive alias) is an endless expansion
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(v, memo) for v in node.value)
    else:
        size = 1
    memo[key] = min(size, _ENDLESS)
    return memo[key]
