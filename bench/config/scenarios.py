"""Scenarios: the inputs of the grid, generated from named dimensions or read from a dataset.

``build`` turns a params file's ``scenarios:`` section into a list of ``Scenario`` records
(deterministic: the same params give the same scenarios, in the same order, in every
process) and checks that every prompt placeholder is a field of every scenario, before
anything is called. ``render`` fills a prompt template with one scenario's fields;
``write_scenarios`` / ``read_scenarios`` keep them in ``runs/<sweep>/scenarios.jsonl``.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import random
import string
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.core.errors import ParamsError, StoreError
from bench.config.params import DatasetSource, GenerateSource, PromptEntry, SubsetDimension, Sweep
from bench.core.records import Scenario, canonical_json
from bench.core.store import RunStore, atomic_write

__all__ = ["build", "check_placeholders", "describe", "generate", "load_dataset", "planned_count", "read_scenarios", "render",
           "write_scenarios"]

# Above this many combinations a seeded sample draws dimension by dimension (with dedupe)
# instead of drawing indices from the whole product.
ENUMERATE_LIMIT = 200_000
# Without ``n``, a product bigger than this is refused (it would not fit in memory, let alone a budget).
FULL_PRODUCT_LIMIT = 1_000_000
_MISSING = object()  # a CSV row shorter than its header: the cell is missing, not empty


# --------------------------------------------------------------------------- generate


@dataclass(frozen=True)
class _Dim:
    """One dimension: ``count`` options, each reachable by index (``option``)."""

    name: str
    values: list[Any]
    sizes: tuple[int, int] | None = None  # set for a subset dimension

    @cached_property
    def count(self) -> int:
        """Return the number of options (values, or subsets of an allowed size)."""
        if self.sizes is None:
            return len(self.values)
        return sum(math.comb(len(self.values), k) for k in range(self.sizes[0], self.sizes[1] + 1))

    def options(self) -> list[Any]:
        """Return every option in order (subsets: by size, then in combination order)."""
        if self.sizes is None:
            return list(self.values)
        lo, hi = self.sizes
        return [list(c) for k in range(lo, hi + 1) for c in itertools.combinations(self.values, k)]

    def option(self, index: int) -> Any:
        """Return the option at ``index`` of ``options()`` without enumerating them."""
        if self.sizes is None:
            return self.values[index]
        m = len(self.values)
        for k in range(self.sizes[0], self.sizes[1] + 1):
            if index < math.comb(m, k):
                return [self.values[i] for i in _unrank_combination(m, k, index)]
            index -= math.comb(m, k)
        raise IndexError(index)


def _unrank_combination(m: int, k: int, rank: int) -> list[int]:
    """Return the ``rank``-th k-combination of range(m) in itertools.combinations order."""
    combo: list[int] = []
    start = 0
    for slot in range(k):
        for i in range(start, m):
            below = math.comb(m - i - 1, k - slot - 1)  # combinations that start with i here
            if rank < below:
                combo.append(i)
                start = i + 1
                break
            rank -= below
    return combo


def _dimensions(source: GenerateSource) -> list[_Dim]:
    """Return the declared dimensions; an empty one or a repeated value is a ParamsError.

    Repeated values would make identical scenarios (ids are content hashes), so a sample
    of ``n`` could not be ``n`` distinct scenarios: they are refused rather than dropped.
    """
    dims = []
    for name, spec in source.dimensions.items():
        values = spec.of if isinstance(spec, SubsetDimension) else spec
        where = f"scenarios.generate.dimensions.{name}"
        if not values:
            raise ParamsError(f"{where}: the list is empty, so no scenario can be made; give at least one value")
        seen: set[str] = set()
        for value in values:
            key = canonical_json(value)
            if key in seen:
                raise ParamsError(f"{where}: the value {key} is listed twice; remove the duplicate")
            seen.add(key)
        dims.append(_Dim(name, list(values), spec.size if isinstance(spec, SubsetDimension) else None))
    return dims


def generate(source: GenerateSource, seed: int) -> list[Scenario]:
    """Return the scenarios of named dimensions: the full product, or a seeded sample of ``n``.

    A list dimension gives one value per scenario; a subset dimension gives a list (in the
    order of ``of``) whose size is within ``size``. Without ``n`` (or with ``n`` at least
    the product's size) the result is the whole product in declared order; otherwise it is
    ``n`` distinct scenarios drawn with ``random.Random(seed)`` and returned in product
    order, so the same params give the same scenarios in every process.
    """
    dims = _dimensions(source)
    total = math.prod(d.count for d in dims)
    if source.n is None and total > FULL_PRODUCT_LIMIT:
        raise ParamsError(f"scenarios.generate: the dimensions make {total:,} combinations; set "
                          f"scenarios.generate.n to sample some of them (at most {FULL_PRODUCT_LIMIT:,} "
                          f"without n)")
    if source.n is None or source.n >= total:
        combos: Iterator[tuple[Any, ...]] = itertools.product(*(d.options() for d in dims))
    else:
        combos = (_decode(dims, i) for i in _sample_indices(dims, total, source.n, random.Random(seed)))
    return [Scenario(fields={d.name: v for d, v in zip(dims, combo)}, source="generate") for combo in combos]


def _sample_indices(dims: list[_Dim], total: int, n: int, rng: random.Random) -> list[int]:
    """Return ``n`` distinct, sorted product indices drawn with ``rng``.

    A small product is sampled as a whole; a huge one (more than ENUMERATE_LIMIT
    combinations) one dimension at a time, redrawing a combination already taken.
    """
    if total <= ENUMERATE_LIMIT:
        return sorted(rng.sample(range(total), n))
    taken: set[int] = set()
    while len(taken) < n:
        index = 0
        for d in dims:
            index = index * d.count + rng.randrange(d.count)
        taken.add(index)
    return sorted(taken)


def _decode(dims: list[_Dim], index: int) -> tuple[Any, ...]:
    """Return the combination at ``index`` of the product (mixed radix, last dimension fastest)."""
    picks = []
    for d in reversed(dims):
        index, rest = divmod(index, d.count)
        picks.append(d.option(rest))
    return tuple(reversed(picks))


# --------------------------------------------------------------------------- datasets


def load_dataset(source: DatasetSource, base_dirs: list[Path]) -> list[Scenario]:
    """Return one scenario per distinct row of a JSONL, CSV or Parquet file.

    ``fields`` maps template fields to columns and ``reference`` maps ground-truth keys
    to columns; ``limit`` keeps the first N rows. Rows with the same fields and
    reference are the same scenario (ids are content hashes), so they are kept once, in
    first-occurrence order. Every problem is a one-line ParamsError naming the file.
    """
    path = _resolve(source.path, base_dirs)
    readers = {".jsonl": _jsonl_rows, ".csv": _csv_rows, ".parquet": _parquet_rows}
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise ParamsError(f"{path}: unknown dataset format '{path.suffix or '(no extension)'}'; "
                          f"use a .jsonl, .csv or .parquet file")
    out: dict[str, Scenario] = {}
    for where, row in itertools.islice(reader(path, source.limit), source.limit):
        fields = _pick(source.fields, row, where, "template field")
        reference = _pick(source.reference, row, where, "reference key") or None
        scenario = Scenario(fields=fields, reference=reference, source=source.path)
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


def _jsonl_rows(path: Path, limit: int | None) -> Iterator[tuple[str, dict[str, Any]]]:
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
        raise ParamsError(f"{path}: cannot read the dataset ({_reason(exc)}); check the file") from None


def _csv_rows(path: Path, limit: int | None) -> Iterator[tuple[str, dict[str, Any]]]:
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
        raise ParamsError(f"{path}: cannot read the dataset ({_reason(exc)}); check the file") from None


def _parquet_rows(path: Path, limit: int | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (``file row N``, row) for the first ``limit`` rows of a Parquet file (polars)."""
    import polars as pl  # lazily: only Parquet datasets pay for the import

    try:
        frame = pl.read_parquet(path, n_rows=limit)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ParamsError(f"{path}: cannot read the Parquet file ({_reason(exc)}); check the file") from None
    for number, row in enumerate(frame.iter_rows(named=True), 1):
        yield f"{path} row {number}", row


def _reason(exc: Exception) -> str:
    """Return an exception's message on one line."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(text.split())


# --------------------------------------------------------------------------- build and check


def describe(fields: dict[str, Any], width: int | None = None) -> str:
    """Return a scenario's fields as one readable line (``persona: nurse; tasks: emails, report``)."""
    text = "; ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in fields.items())
    text = " ".join(text.split())
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def planned_count(sweep: Sweep) -> int | None:
    """Return how many scenarios the params will make, without making them (None for a dataset)."""
    source = sweep.scenarios.generate
    if source is None:
        return None
    try:
        total = math.prod(d.count for d in _dimensions(source))
    except ParamsError:
        return None  # build reports it, with the file name
    return min(total, source.n) if source.n is not None else total


def build(sweep: Sweep, params_path: Path, project_root: Path) -> list[Scenario]:
    """Return the sweep's scenarios, after checking every prompt can be filled from each of them.

    Datasets are looked up next to the params file first, then under the project root.
    """
    source = sweep.scenarios
    if source.generate is not None:
        try:
            scenarios = generate(source.generate, sweep.seed)
        except ParamsError as exc:
            raise ParamsError(f"{params_path}: {exc}") from None
    else:
        assert source.dataset is not None  # Scenarios guarantees exactly one source
        scenarios = load_dataset(source.dataset, [Path(params_path).parent, Path(project_root)])
    check_placeholders(sweep.prompts, scenarios, params_path)
    return scenarios


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
            parsed = [name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None]
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


# --------------------------------------------------------------------------- render


def render(prompt: PromptEntry, scenario: Scenario) -> list[dict[str, str]]:
    """Return the OpenAI chat messages of a prompt filled with a scenario's fields.

    The messages are an optional ``system`` message, then the ``user`` message. Templates
    follow ``str.format`` rules: ``{field}`` is replaced by the field's text, and a
    literal brace is written doubled, ``{{`` or ``}}`` (``{{"a": {x}}}`` renders as
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


# --------------------------------------------------------------------------- run files


def write_scenarios(run_dir: Path, scenarios: list[Scenario]) -> Path:
    """Write ``run_dir/scenarios.jsonl`` atomically and return its path.

    One ``model_dump_json()`` per line, so the same params give a byte-identical file; the
    file is written to a temporary name in the same folder, fsynced, then renamed over the
    old one, so a reader never sees half a file.
    """
    path = RunStore(run_dir).path(Scenario)
    data = "".join(s.model_dump_json() + "\n" for s in scenarios).encode("utf-8")
    atomic_write(path, data)
    _fsync_dir(path.parent)
    return path


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: not every platform can fsync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_scenarios(run_dir: Path) -> list[Scenario]:
    """Return the scenarios of a run, in the order ``write_scenarios`` wrote them.

    Raises StoreError naming the file (and line) when it is missing or unreadable.
    """
    path = RunStore(run_dir).path(Scenario)
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the run's scenarios ({_reason(exc)}); "
                         f"check the run folder or run the collect step first") from None
    out = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(Scenario.model_validate_json(line))
        except ValidationError as exc:
            raise StoreError(f"{path}:{lineno}: unreadable scenario ({exc.errors()[0]['msg']}); the file "
                             f"is written whole, so it was edited: re-run collect to rewrite it") from None
    return out
