"""Dataset files as scenarios: `READERS` maps a format name (the file's extension) to its reader, and
`load_dataset` reads one. Adding a format is one function and one entry there."""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from bench.config._errors import reason
from bench.config.dataset_images import Sink, row_images
from bench.config.sources import DatasetSource
from bench.core.errors import ParamsError
from bench.core.records import Scenario

Row = tuple[str, dict[str, Any]]  # (where the row is, e.g. ``file:line``, for messages; its columns)
_MISSING = object()  # a CSV row shorter than its header: the cell is missing, not empty


class DatasetReader(Protocol):
    """Yield a dataset file's rows in order (at least the first ``limit``); a problem is a one-line ParamsError."""

    def __call__(self, path: Path, limit: int | None) -> Iterator[Row]: ...


def jsonl_rows(path: Path, limit: int | None) -> Iterator[Row]:
    """Yield (``file:line``, object) for each non-blank line of a JSONL file."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ParamsError(f"{path}:{lineno}: invalid JSON ({exc.msg} at column {exc.colno}); "
                                      f"fix or remove that line") from None
                if not isinstance(row, dict):
                    raise ParamsError(f"{path}:{lineno}: expected one JSON object per line, got "
                                      f"{type(row).__name__}; fix or remove that line")
                yield f"{path}:{lineno}", row
    except (OSError, UnicodeDecodeError) as exc:
        raise ParamsError(f"{path}: cannot read the dataset ({reason(exc)}); check the file") from None


def csv_rows(path: Path, limit: int | None) -> Iterator[Row]:
    """Yield (``file:line (row N)``, row) for each data row of a CSV file with a header line."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh, restval=_MISSING)
            try:
                for number, row in enumerate(reader, 1):
                    yield f"{path}:{reader.line_num} (row {number})", row
            except csv.Error as exc:
                raise ParamsError(f"{path}:{reader.line_num}: invalid CSV ({exc}); fix that line") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ParamsError(f"{path}: cannot read the dataset ({reason(exc)}); check the file") from None


def parquet_rows(path: Path, limit: int | None) -> Iterator[Row]:
    """Yield (``file row N``, row) for the first ``limit`` rows of a Parquet file (polars)."""
    import polars as pl  # noqa: PLC0415 (heavy; only Parquet datasets pay for the import)

    try:
        frame = pl.read_parquet(path, n_rows=limit)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ParamsError(f"{path}: cannot read the Parquet file ({reason(exc)}); check the file") from None
    for number, row in enumerate(frame.iter_rows(named=True), 1):
        yield f"{path} row {number}", row


READERS: dict[str, DatasetReader] = {"jsonl": jsonl_rows, "csv": csv_rows, "parquet": parquet_rows}
"""The dataset formats: a file's extension (lower case, without the dot) → its reader."""


def load_dataset(source: DatasetSource, base_dirs: list[Path], sink: Sink | None = None) -> list[Scenario]:
    """Return one scenario per distinct row of a dataset file (first occurrence kept: ids are content hashes).
    ``fields``/``reference`` map columns; ``limit`` keeps the first N rows; ``sink`` gets ``images`` columns' bytes."""
    path = _resolve(source.path, base_dirs)
    reader = READERS.get(path.suffix.lower().removeprefix("."))
    if reader is None:
        formats = [f".{name}" for name in READERS]
        raise ParamsError(f"{path}: unknown dataset format '{path.suffix or '(no extension)'}'; "
                          f"use a {', '.join(formats[:-1])} or {formats[-1]} file")
    out: dict[str, Scenario] = {}
    for where, row in itertools.islice(reader(path, source.limit), source.limit):
        fields = _pick(source.fields, row, where, "template field")
        reference = _pick(source.reference, row, where, "reference key") or None
        images = row_images(source.images, row, path.parent, where, source.max_image_mb, sink) or None
        scenario = Scenario(fields=fields, reference=reference, images=images, source=source.path)
        out.setdefault(scenario.id, scenario)
    if not out:
        raise ParamsError(f"{path}: the dataset has no rows; add rows or point scenarios.dataset.path "
                          f"at another file")
    return list(out.values())


def _resolve(written: str, base_dirs: list[Path]) -> Path:
    """Return the first existing file among ``written`` joined to each base dir (or as is if absolute)."""
    path = Path(written).expanduser()
    tried = [path] if path.is_absolute() else [Path(base) / path for base in base_dirs]
    for candidate in tried:
        if candidate.is_file():
            return candidate
    places = ", ".join(str(p) for p in tried) or "(no folder to look in)"
    raise ParamsError(f"dataset file '{written}' not found (tried: {places}); fix scenarios.dataset.path "
                      f"(relative to the params file's folder or the project root)")


def _pick(mapping: dict[str, str], row: dict[str, Any], where: str, role: str) -> dict[str, Any]:
    """Return ``{key: row[column]}`` for a field or reference mapping; a missing column is a ParamsError."""
    out = {}
    for key, column in mapping.items():
        value = row.get(column, _MISSING)
        if value is _MISSING:
            have = ", ".join(str(c) for c in row if isinstance(c, str) and row[c] is not _MISSING)
            raise ParamsError(f"{where}: no column '{column}', which {role} '{key}' needs (the row's "
                              f"columns: {have or 'none'}); fix the mapping in scenarios.dataset or the file")
        out[key] = value
    return out
