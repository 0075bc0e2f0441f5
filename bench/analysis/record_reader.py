"""Run files read by polars: every readable record of a kind as the dict of its fields, one schema per kind.
A file the model accepts as it stands is read whole by polars; any other line by line, as ``RunStore.iter``."""

from __future__ import annotations

import json
import types
from itertools import chain
from typing import Any, Literal, Union, get_args, get_origin

import polars as pl
from pydantic import BaseModel

from bench.core.records import RECORD_TYPES, SCHEMA_VERSION, Record
from bench.core.store import RunStore, parse_line

try:  # the `perf` extra: a line parsed in a third of json's time
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - exercised where the extra is missing
    _loads = json.loads

_NONE = type(None)
_SCALARS = {str: pl.Utf8, int: pl.Int64, float: pl.Float64, bool: pl.Boolean}


class Rows(list):
    """Records as the dicts of their fields, in file order, and their columns (a field's values, row by row)."""

    def __init__(self, rows: list[dict[str, Any]], columns: dict[str, list[Any]] | None = None):
        super().__init__(rows)
        self._columns: dict[str, list[Any]] = columns or {}

    def column(self, name: str) -> list[Any]:
        """Return the values of field ``name``, one per row."""
        if name not in self._columns:
            self._columns[name] = [r[name] for r in self]
        return self._columns[name]


class _Field:
    """How one field of a record model is read: its polars type (None: free-form JSON), whether null is its
    value when absent (an optional field defaulting to None), the literals it allows, the kind of JSON it holds."""

    def __init__(self, name: str, ann: Any, default: Any, required: bool):
        optional, ann = _unwrapped(ann)
        self.name, self.nullable = name, optional and default is None and not required
        self.literals = frozenset(get_args(ann)) if get_origin(ann) is Literal else None
        self.dtype: Any = pl.Utf8 if self.literals is not None else _dtype(ann)
        self.model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        self.json_kind = get_origin(ann) or ann if self.dtype is None else None  # dict or list
        self.floats = self.json_kind is dict and get_args(ann)[1:] == (float,)  # dict[str, float]: numbers only
        self.of_dicts = self.json_kind is list and get_origin((get_args(ann) or (None,))[0]) is dict  # list[dict]
        self.fields = _fields(self.model) if self.model is not None else []


def _unwrapped(ann: Any) -> tuple[bool, Any]:
    """Return (is it ``X | None``, X)."""
    if get_origin(ann) in (Union, types.UnionType):
        inner = [a for a in get_args(ann) if a is not _NONE]
        if len(inner) == 1:
            return True, inner[0]
    return False, ann


def _dtype(ann: Any) -> Any:
    """Return the polars type of a field annotated ``ann``; None for free-form JSON (taken from the parsed line)."""
    if ann in _SCALARS:
        return _SCALARS[ann]
    if get_origin(ann) is list and get_args(ann) == (str,):
        return pl.List(pl.Utf8)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return pl.Struct({f.name: f.dtype for f in _fields(ann) if f.dtype is not None})
    if get_origin(ann) in (dict, list) or ann in (dict, list):
        return None
    raise TypeError(f"bench.analysis.record_reader cannot read a field of type {ann!r}")


def _fields(cls: type[BaseModel]) -> list[_Field]:
    return [_Field(n, f.annotation, f.default, f.is_required()) for n, f in cls.model_fields.items()]


_FIELDS: dict[type, list[_Field]] = {}


def schema_of(cls: type[Record]) -> dict[str, Any]:
    """Return the polars schema ``pl.read_ndjson`` reads records of ``cls`` with (free-form fields left out)."""
    return {f.name: f.dtype for f in _record_fields(cls) if f.dtype is not None}


def _record_fields(cls: type[Record]) -> list[_Field]:
    if cls not in _FIELDS:
        _FIELDS[cls] = _fields(cls)
    return _FIELDS[cls]


def read_rows(store: RunStore, kind: str | type[Record]) -> Rows:
    """Return every readable record of ``kind`` in file order as the dict of its fields (set-aside lines left
    out with the store's warning), as :meth:`RunStore.iter` would give them, record by record."""
    cls = RECORD_TYPES[kind if isinstance(kind, str) else kind.kind]
    out: list[dict[str, Any]] = []
    parts: list[dict[str, list[Any]] | None] = []  # per file, its columns (None: read by pydantic)
    for path in store.files(cls):
        lines = path.read_bytes().split(b"\n")
        numbers = [n for n, line in enumerate(lines, 1) if line.strip()]  # the lines RunStore.lines yields
        if numbers and numbers[-1] == len(lines) and not _complete(lines[-1]):  # torn: set aside, the rest read
            parse_line(cls, path, numbers[-1], lines[-1], True)
            numbers.pop()
        texts = [lines[n - 1] for n in numbers]
        rows, columns = _fast(cls, texts) if texts else ([], None)
        if rows is None:  # some line the declared schema or the model's rules do not pass: pydantic decides
            recs = (parse_line(cls, path, n, lines[n - 1], n == len(lines)) for n in numbers)
            rows = [r.model_dump() for r in recs if r is not None]
        out += rows
        parts.append(columns)
    if parts and None not in parts:  # every file read the fast way: its columns stand for the rows
        merged = parts[0] if len(parts) == 1 else {n: list(chain.from_iterable(p[n] for p in parts)) for n in parts[0]}
        return Rows(out, merged)  # type: ignore[arg-type]
    return Rows(out)


def _complete(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _fast(cls: type[Record], texts: list[bytes]) -> tuple[list[dict[str, Any]] | None, dict[str, list[Any]] | None]:
    """Return the rows of these lines parsed by polars, and their columns; (None, None) if a line needs pydantic."""
    fields = _record_fields(cls)
    try:
        frame = pl.read_ndjson(b"\n".join(texts), schema=schema_of(cls))
    except pl.exceptions.PolarsError:  # a value of another type, a line that is not JSON
        return None, None
    if frame.height != len(texts) or not _passes(frame, fields):
        return None, None
    try:
        rows = list(map(_loads, texts))  # once each: the free-form fields polars cannot keep as written
    except ValueError:
        return None, None
    columns = _as_model_dumps(rows, fields)
    return (rows, columns) if columns is not None else (None, None)


def _as_model_dumps(rows: list[dict[str, Any]], fields: list[_Field]) -> dict[str, list[Any]] | None:
    """Make parsed lines what ``model_dump()`` gives and return their columns, or None if one is not as it stands."""
    names = tuple(f.name for f in fields)
    if not rows:
        return {name: [] for name in names}
    if set(map(tuple, map(dict.keys, rows))) != {names}:
        return None
    columns = dict(zip(names, map(list, zip(*map(dict.values, rows)))))
    for f in fields:
        column = columns[f.name]
        kinds = set(map(type, column))
        if f.dtype == pl.Utf8 and not kinds <= {str, _NONE}:
            return None
        if f.dtype == pl.List(pl.Utf8) and not _types(chain.from_iterable(filter(None, column))) <= {str}:
            return None
        if f.dtype == pl.Float64 and int in kinds:
            column = columns[f.name] = [float(x) if type(x) is int else x for x in column]
            for row, value in zip(rows, column):
                row[f.name] = value
        if f.dtype is None and not _free(column, f):
            return None
        if f.model is not None and _as_model_dumps([v for v in column if v is not None], f.fields) is None:
            return None
    return columns


def _passes(frame: pl.DataFrame, fields: list[_Field]) -> bool:
    """Return whether every column holds what the model accepts as it stands (nothing to fill, refuse, rewrite)."""
    for f in fields:
        if f.dtype is None:
            continue
        col = frame[f.name]
        if not f.nullable and col.null_count():
            return False
        if f.literals is not None and not set(col.drop_nulls().unique().to_list()) <= f.literals:
            return False
        if f.model is not None:
            inner = col.drop_nulls().struct.unnest() if col.len() > col.null_count() else None
            if inner is not None and not _passes(inner, f.fields):
                return False
    if {"id", "schema_version"} <= set(frame.columns) and frame.height:
        return bool((frame["id"] != "").all()) and frame["schema_version"].max() <= SCHEMA_VERSION
    return True


def _free(values: list[Any], f: _Field) -> bool:
    """Return whether a free-form field's values are of their kind (a dict[str, float]'s numbers made floats)."""
    if not _types(values) <= {f.json_kind, _NONE}:
        return False
    if f.of_dicts and not _types(chain.from_iterable(filter(None, values))) <= {dict}:
        return False
    if f.floats:
        numbers = _types(chain.from_iterable(map(dict.values, filter(None, values))))
        if not numbers <= {int, float}:
            return False
        for v in filter(None, values) if int in numbers else ():
            v.update({k: float(x) for k, x in v.items()})
    return True


def _types(values: Any) -> set[type]:
    return set(map(type, values))
