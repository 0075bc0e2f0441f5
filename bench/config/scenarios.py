"""Scenarios: the inputs of the grid, generated from named dimensions, read from a dataset or listed inline;
``write_scenarios`` / ``read_scenarios`` keep them in ``scenarios.jsonl``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.config._errors import reason
from bench.config.generator import generate, product_size
from bench.config.params import Sweep
from bench.config.readers import load_dataset
from bench.config.sources import InlineScenario
from bench.config.templates import check_placeholders
from bench.core.errors import ParamsError, StoreError
from bench.core.records import Scenario
from bench.core.store import RunStore, atomic_write


def describe(fields: dict[str, Any], width: int | None = None) -> str:
    """Return a scenario's fields as one readable line (``persona: nurse; tasks: emails, report``)."""
    text = "; ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in fields.items())
    text = " ".join(text.split())
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def planned_count(sweep: Sweep) -> int | None:
    """Return how many scenarios the params will make, without making them (None for a dataset)."""
    if sweep.scenarios.inline is not None:
        return len(sweep.scenarios.inline)
    source = sweep.scenarios.generate
    if source is None:
        return None
    try:
        total = product_size(source)
    except ParamsError:
        return None  # build reports it, with the file name
    return min(total, source.n) if source.n is not None else total


def build(sweep: Sweep, params_path: Path, project_root: Path) -> list[Scenario]:
    """Return the sweep's scenarios, checked to fill every prompt (datasets: next to the params file, then the root)."""
    source = sweep.scenarios
    if source.generate is not None:
        try:
            scenarios = generate(source.generate, sweep.seed)
        except ParamsError as exc:
            raise ParamsError(f"{params_path}: {exc}") from None
    elif source.inline is not None:
        scenarios = listed_scenarios(source.inline, params_path)
    else:
        assert source.dataset is not None  # Scenarios guarantees exactly one source
        scenarios = load_dataset(source.dataset, [Path(params_path).parent, Path(project_root)])
    check_placeholders(sweep.prompts, scenarios, params_path)
    return scenarios


def listed_scenarios(inline: list[InlineScenario], params_path: Path) -> list[Scenario]:
    """Return the params file's ``scenarios.inline`` in order; two alike (one id) are a ParamsError naming both."""
    out: dict[str, int] = {}
    scenarios = []
    for n, entry in enumerate(inline):
        scenario = Scenario(fields=entry.fields, reference=entry.reference or None, source="inline")
        first = out.setdefault(scenario.id, n)
        if first != n:
            raise ParamsError(f"{params_path}: scenarios.inline[{n}] is the same scenario as scenarios.inline"
                              f"[{first}] (same fields and reference); remove one")
        scenarios.append(scenario)
    return scenarios


def reference_source(sweep: Sweep, params_path: Path) -> str:
    """Return where the sweep's scenarios (and so their ``reference`` values) come from, for a message."""
    source = sweep.scenarios
    if source.dataset is not None:
        return f"the dataset {source.dataset.path} (mapped by scenarios.dataset.reference in {params_path})"
    if source.inline is not None:
        return f"scenarios.inline in {params_path} (each scenario's reference)"
    return (f"scenarios.generate in {params_path} (generated scenarios carry no reference: list them under "
            f"scenarios.inline, each with its reference, or read a dataset)")


def write_scenarios(run_dir: Path, scenarios: list[Scenario]) -> Path:
    """Write ``run_dir/scenarios.jsonl`` atomically (the same params give a byte-identical file); return its path."""
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
    """Return the scenarios of a run in file order; StoreError naming the file (and line) when missing or unreadable."""
    path = RunStore(run_dir).path(Scenario)
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the run's scenarios ({reason(exc)}); "
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
