"""Validation errors as one line each: ``file: key.path: what is wrong (what is allowed)``.
Key paths name only keys the researcher wrote (no pydantic union member names or discriminator tags)."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

_SEQUENCES = (list, tuple, set, frozenset)


def format_errors(path: Path | str, exc: ValidationError, root: type[BaseModel], tag_noun: str = "item") -> str:
    """Return one line per error of validating a file's data as ``root`` (repeated lines once).
    ``tag_noun`` names a discriminated union's members ("unknown check kind 'jsn' (one of: regex, …)")."""
    lines = []
    for err in exc.errors():
        keys, node, dropped = _walk(root, err["loc"])
        if dropped and dropped[-1].startswith("list[") and isinstance(err.get("input"), dict):
            continue  # a mapping was meant as the union's other member (a subset dimension): that error says it
        where = _loc_text(keys)
        if err["type"] in ("union_tag_not_found", "union_tag_invalid"):
            lines.append(f"{path}: {where}.{_tag_message(err, node, tag_noun)}")
            continue
        msg = _message(err, root)
        lines.append(f"{path}: {where}: {msg}" if where else f"{path}: {msg}")
    return "\n".join(dict.fromkeys(lines))


def reason(exc: BaseException) -> str:
    """Return an exception's message on one line."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(text.split())


def _message(err: Any, root: type[BaseModel]) -> str:
    """Return what is wrong, in the researcher's words, for one pydantic error."""
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(root, err["loc"][:-1])
        return f"unknown key '{err['loc'][-1]}'" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    if err["type"] == "missing":
        return "required key is missing"
    if err["type"] == "too_short":
        n = err.get("ctx", {}).get("min_length", 1)
        return f"needs at least {n} item{'' if n == 1 else 's'}"
    msg = err["msg"].removeprefix("Value error, ")
    if "input" in err and err["type"] != "value_error" and not isinstance(err["input"], dict):
        msg += f" (got {err['input']!r})"
    return msg


def _tag_message(err: Any, node: Any, tag_noun: str) -> str:
    """Return ``<discriminator>: what is wrong (one of: <tags>)`` for a discriminated union's error."""
    members, disc = _union(node)
    disc = disc or str(err.get("ctx", {}).get("discriminator", "kind")).strip("'")
    tags = [str(get_args(m.model_fields[disc].annotation)[0]) for m in members
            if _is_model(m) and disc in m.model_fields]
    got = err.get("ctx", {}).get("tag")
    what = f"unknown {tag_noun} {disc} '{got}'" if got else "required key is missing"
    return f"{disc}: {what} (one of: {', '.join(tags)})"


def _walk(root: type[BaseModel], loc: tuple[Any, ...]) -> tuple[tuple[Any, ...], Any, list[str]]:
    """Return (the keys and indexes of ``loc`` the researcher wrote, its end's annotation, the union names and tags)."""
    keys: list[Any] = []
    dropped: list[str] = []
    node: Any = root
    for part in loc:
        members, disc = _union(node)
        if len(members) > 1 and isinstance(part, str):  # pydantic names the member it tried here
            dropped.append(part)
            node = _member(members, disc, part)
            continue
        keys.append(part)
        node = _child(members[0] if members else None, part)
    return tuple(keys), node, dropped


def _allowed_keys(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Return the keys allowed at a location (for unknown-key errors); empty when it is not a model."""
    members, _disc = _union(_walk(root, loc)[1])
    model = members[0] if len(members) == 1 else None
    return [f.alias or name for name, f in model.model_fields.items()] if _is_model(model) else []  # as written


def _union(node: Any) -> tuple[list[Any], str | None]:
    """Return the members of a union annotation (None left out) and its discriminator, or ([node], None)."""
    disc = None
    while get_origin(node) is Annotated:
        node, *meta = get_args(node)
        disc = next((m.discriminator for m in meta if isinstance(m, FieldInfo) and m.discriminator), disc)
    if get_origin(node) in (Union, types.UnionType):
        return [m for m in get_args(node) if m is not type(None)], disc
    return [node], disc


def _member(members: list[Any], disc: str | None, label: str) -> Any:
    """Return the union member a pydantic location label names (its class name, or its tag), else None."""
    for m in members:
        if not _is_model(m):
            continue
        if label == m.__name__ or label.endswith(f", {m.__name__}]"):
            return m
        field = m.model_fields.get(disc) if disc else None
        if field is not None and label in get_args(field.annotation):
            return m
    return None


def _child(node: Any, part: Any) -> Any:
    """Return the annotation one key or index below ``node`` (None when unknown)."""
    if _is_model(node):
        field = node.model_fields.get(part) if isinstance(part, str) else None
        return field.annotation if field is not None else None
    args = get_args(node)
    if get_origin(node) in _SEQUENCES and args:
        return args[0]
    if get_origin(node) is dict and len(args) == 2:
        return args[1]
    return None


def _is_model(node: Any) -> bool:
    return isinstance(node, type) and not get_args(node) and issubclass(node, BaseModel)


def _loc_text(keys: tuple[Any, ...]) -> str:
    """Return a key path as the researcher would write it: ``models[0].params``."""
    out = ""
    for part in keys:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
