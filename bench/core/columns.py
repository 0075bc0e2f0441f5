"""Run files read column-wise: every readable record of a kind as a plain dict, checked a column at a time.

Validating each line with its pydantic model (``RunStore.iter``) costs about 12 µs a record: two seconds for a
folder of 100,000 judgments, before any analysis. Here each line is parsed by orjson, and the fields of every
line are checked together, one column at a time (a set of the Python types in a column, compared with what the
record model's annotation allows), so the check costs C loops rather than a validator call per line. A line the
fast check does not pass (a broken line, a hand-edited value of another type, a key the model does not know, a
missing field, an old spelling a model validator rewrites) goes the record-by-record way: it is validated by its
pydantic model and read as that record's ``model_dump()``, or set aside with the store's warning naming the file
and line. So every row is what the pydantic path gives, field for field, up to a number written as an int where
the model says float (the frames cast it). Without orjson (the ``perf`` extra) every line goes the pydantic way.

The checks are derived from the record models' annotations, so a new field is checked without an edit here; a
field of a type this module cannot check, or a model validator it does not mirror, sends every line of that
record type the pydantic way (:func:`mirrored` says which).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from itertools import chain, compress, repeat
from operator import is_not, itemgetter
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from bench.core.records import RECORD_TYPES, SCHEMA_VERSION, Record
from bench.core.store import RunStore, parse_line

try:  # the `perf` extra
    import orjson
except ImportError:  # pragma: no cover - exercised where the extra is missing
    orjson = None  # type: ignore[assignment]

Check = Callable[..., set[int]]  # a column's values -> the positions that fail the check
_NONE = type(None)
_SCALARS = {str: frozenset({str}), int: frozenset({int}), float: frozenset({float, int}), bool: frozenset({bool})}
# The model validators this module mirrors: an id filled in when absent (the fast check wants a non-empty id), a
# schema newer than this bench refused (a newer one fails), a usage from before ``calls`` (a missing field
# fails), the packed mode's old words (``batch_id`` is an unknown key, ``batch`` no mode: both fail)
MIRRORED = {"_fill_id", "_check_version", "_old_counts", "_packed_words"}


class Rows(list):
    """Records as the dicts of their fields, in file order, and their columns (a field's values, row by row)."""

    def __init__(self, rows: list[dict[str, Any]], parts: list[dict[str, Sequence[Any]] | None]):
        super().__init__(rows)
        self._parts = parts  # per file, the columns its check made (None: a line went the pydantic way)
        self._columns: dict[str, Sequence[Any]] = {}

    def column(self, name: str) -> Sequence[Any]:
        """Return the values of field ``name``, one per row: the check's column when it stands for every row."""
        if name not in self._columns:
            parts = self._parts
            if parts and all(p is not None for p in parts):
                self._columns[name] = parts[0][name] if len(parts) == 1 else \
                    list(chain.from_iterable(p[name] for p in parts))  # type: ignore[index]
            else:
                self._columns[name] = list(map(itemgetter(name), self))
        return self._columns[name]


def read_rows(store: RunStore, kind: str | type[Record]) -> Rows:
    """Return every readable record of ``kind`` in file order as the dict of its fields (set-aside lines left
    out with the store's warning), as :meth:`RunStore.iter` would give them, record by record."""
    cls = RECORD_TYPES[kind if isinstance(kind, str) else kind.kind]
    check = _record_check(cls) if orjson is not None and mirrored(cls) else None
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Sequence[Any]] | None] = []
    for path in store.files(cls):
        lines = path.read_bytes().split(b"\n")
        numbers = [n for n, line in enumerate(lines, 1) if line.strip()]  # the lines RunStore.lines yields
        rows: list[Any] = [None] * len(numbers)
        columns: dict[str, Sequence[Any]] | None = {}
        if check is not None:
            try:
                rows = [orjson.loads(lines[n - 1]) for n in numbers]
            except ValueError:  # not JSON orjson reads (a torn line, NaN, a lone surrogate escape): pydantic decides
                rows = [_loads(lines[n - 1]) for n in numbers]
        redo = sorted(check(rows, columns)) if check is not None else range(len(rows))
        for i in redo:
            rec = parse_line(cls, path, numbers[i], lines[numbers[i] - 1], numbers[i] == len(lines))
            rows[i] = rec.model_dump() if rec is not None else None
        if rows:  # an empty file adds no row, nor a part
            parts.append(columns if not redo else None)
        out += [r for r in rows if r is not None] if redo else rows
    return Rows(out, parts)


def mirrored(cls: type[BaseModel]) -> bool:
    """Return whether the fast check stands for ``cls``'s validation: every field's type is one it checks and
    every validator one it mirrors (else each line of ``cls`` is validated by pydantic)."""
    try:
        _record_check(cls)
    except TypeError:
        return False
    return True


def _loads(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except ValueError:  # not JSON orjson reads (NaN, a lone surrogate escape): pydantic decides
        return None


_CHECKS: dict[type, Check] = {}


def _record_check(cls: type[BaseModel]) -> Check:
    """Return the check of whole rows of ``cls`` (raise TypeError for a model it cannot stand for)."""
    if cls not in _CHECKS:
        decorators = cls.__pydantic_decorators__
        unknown = set(decorators.model_validators) - MIRRORED
        if unknown or decorators.field_validators or decorators.root_validators:
            raise TypeError(f"{cls.__name__}: validators {sorted(unknown)} are not mirrored by bench.core.columns")
        _CHECKS[cls] = _model_check(cls)
    return _CHECKS[cls]


def _model_check(cls: type[BaseModel]) -> Check:
    """Return the check of dicts of ``cls``: a dict holding exactly its fields, each of its annotated type."""
    fields = tuple(cls.model_fields)
    names, checks = frozenset(fields), [_check(f.annotation) for f in cls.model_fields.values()]
    get = itemgetter(*fields)

    def run(rows: Sequence[Any], keep: dict[str, Sequence[Any]] | None = None) -> set[int]:
        """Return the positions of ``rows`` that fail; ``keep`` gets the columns (when no row fails)."""
        if set(map(type, rows)) <= {dict} and set(map(tuple, map(dict.keys, rows))) <= {fields}:
            whole, bad, values = range(len(rows)), set(), map(dict.values, rows)  # every row: the fields, in order
        else:
            whole = [i for i, r in enumerate(rows) if type(r) is dict and len(r) == len(names) and r.keys() <= names]
            bad = set(range(len(rows))) - set(whole)
            values = map(get, (rows[i] for i in whole))
        if not whole:
            return bad
        for name, check, column in zip(fields, checks, zip(*values, strict=True), strict=True):
            bad |= {whole[p] for p in check(column) | _rule(cls, name, column)}
            if keep is not None:
                keep[name] = column
        return bad
    return run


def _rule(cls: type[BaseModel], name: str, column: Sequence[Any]) -> set[int]:
    """Return the positions a mirrored model validator would act on: an empty id, a schema newer than bench's."""
    if issubclass(cls, Record) and name == "id" and not all(column):
        return {p for p, v in enumerate(column) if not v}
    if issubclass(cls, Record) and name == "schema_version" and not _at_most(column, SCHEMA_VERSION):
        return {p for p, v in enumerate(column) if type(v) is int and v > SCHEMA_VERSION}
    return set()


def _at_most(column: Sequence[Any], most: int) -> bool:
    try:
        return max(column, default=most) <= most
    except TypeError:  # a value of another type (which its own check fails)
        return False


def _check(ann: Any) -> Check:
    """Return the check of a column of values annotated ``ann`` (raise TypeError for a type it cannot check)."""
    origin, args = get_origin(ann), get_args(ann)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not _NONE]
        if len(inner) != 1 or len(args) != 2:
            raise TypeError(f"bench.core.columns cannot check a field of type {ann!r}")
        if inner[0] in _SCALARS:
            return _typed(_SCALARS[inner[0]] | {_NONE})
        if get_origin(inner[0]) is Literal:
            return _among(frozenset(get_args(inner[0])) | {None})
        return _optional(_check(inner[0]))
    if ann is Any:
        return lambda column: set()
    if ann in _SCALARS:
        return _typed(_SCALARS[ann])
    if origin is Literal:
        return _among(frozenset(args))
    if origin is dict and args and args[0] is str:
        return _container(dict, None if args[1] is Any else _check(args[1]), dict.values)
    if origin is list and args:
        return _container(list, None if args[0] is Any else _check(args[0]), iter)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return _record_check(ann)
    raise TypeError(f"bench.core.columns cannot check a field of type {ann!r}")


def _typed(allowed: frozenset[type]) -> Check:
    def run(column: Sequence[Any]) -> set[int]:
        if set(map(type, column)) <= allowed:
            return set()
        return {p for p, v in enumerate(column) if type(v) not in allowed}
    return run


def _among(values: frozenset[Any]) -> Check:
    kinds = frozenset(map(type, values))

    def run(column: Sequence[Any]) -> set[int]:
        if set(map(type, column)) <= kinds and set(column) <= values:
            return set()
        return {p for p, v in enumerate(column) if type(v) not in kinds or v not in values}
    return run


def _optional(check: Check) -> Check:
    def run(column: Sequence[Any]) -> set[int]:
        nones = column.count(None)  # type: ignore[attr-defined]
        if not nones or nones == len(column):
            return check(column) if not nones else set()
        at = list(compress(range(len(column)), map(is_not, column, repeat(None))))
        return {at[q] for q in check([column[p] for p in at])}
    return run


def _container(kind: type, inner: Check | None, items: Callable[[Any], Any]) -> Check:
    """Return the check of a column of ``kind`` (dict or list) whose items (``items`` of each) pass ``inner``."""
    outer = _typed(frozenset({kind}))

    def run(column: Sequence[Any]) -> set[int]:
        bad = outer(column)
        if inner is None:
            return bad
        good = [p for p in range(len(column)) if p not in bad] if bad else range(len(column))
        values = list(chain.from_iterable(map(items, [column[p] for p in good] if bad else column)))
        failed = inner(values)
        if not failed:
            return bad
        owners = list(chain.from_iterable([p] * len(column[p]) for p in good))
        return bad | {owners[q] for q in failed}
    return run
