"""A run: one params file opened and validated, with its scenarios, its selected cells and its folder.

`open_run` validates everything that can be validated without a model call, so a mistake stops the run before
anything is spent."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bench.config.entries import Endpoint
from bench.config.params import Cell, Sweep, load_sweep
from bench.config.scenarios import build, planned_count
from bench.config.vision import check_vision
from bench.core import paths
from bench.core.errors import ParamsError
from bench.core.records import Scenario
from bench.core.store import RunStore
from bench.models.dry import dry_model
from bench.models.genparams import param_problems
from bench.models.tools_support import check_tools


@dataclass(frozen=True)
class Link:
    """What a sweep's driver shares with the kernel running one of its executions (the notebook's papermill
    parameters, docs/sweeps.md): none of it is a secret (the lease server's token travels by environment)."""

    lease_server: str | None = None  # "unix:<path>" or "tcp:<host>:<port>": model caps held sweep-wide there
    sweep_cap: int | None = None  # limits.max_concurrency, held by the lease server across executions side by side
    shared_budget: bool = False  # limits.budget_usd held by the lease server for the whole sweep
    lock_held: bool = False  # the driver holds the run folder's lock on this process's behalf


@dataclass
class Run:
    """Everything a stage needs to know about one sweep run."""

    sweep: Sweep
    params_path: Path
    root: Path
    dir: Path
    scenarios: list[Scenario]
    cells: list[Cell]
    dry_run: bool = False  # every model and judge answered by dry/<id> (bench sweep --dry-run)
    supersede: bool = False  # a changed cell, judge or rubric version supersedes its records (--supersede)
    batch: bool = False  # every model and judge through its provider's Batch API (--batch)
    link: Link = field(default_factory=Link)  # what the sweep's driver shares with this execution (none: a notebook)

    def endpoints(self) -> list[Endpoint]:
        """Return every entry this run may call, once each: its cells' models, simulated users and judges."""
        cells = self.cells
        called = ([c.model for c in cells] + [c.prompt.user_simulator for c in cells if c.prompt.user_simulator]
                  + [j for j in self.sweep.judges if j.model is not None])  # a checks-only judge calls none
        return list({id(e): e for e in called}.values())

    @property
    def store(self) -> RunStore:
        """Return the run's store (all shards merged when reading)."""
        return RunStore(self.dir)

    def describe(self) -> str:
        """Return a short human summary of the grid."""
        s = self.sweep
        n = len(self.cells) * len(self.scenarios) * s.samples
        return (f"sweep {s.name}: {len(self.cells)} cells ({len(s.models)} models × {len(s.prompts)} prompts"
                f"{', filtered' if len(self.cells) < len(s.cells()) else ''}) × {len(self.scenarios)} scenarios"
                f" × {s.samples} samples = {n} candidates; run folder {self.dir}")


def open_run(params: str | Path, cells: Any = None, run_dir: str | Path | None = None, *,
             dry_run: bool = False, batch: bool = False, supersede: bool = False, lease_server: str | None = None,
             sweep_cap: int | None = None, shared_budget: bool = False, lock_held: bool = False) -> Run:
    """Return the validated Run of a params file (no model is called); raise ParamsError on any mistake.
    ``dry_run``: every model ``dry/`` (:func:`dry_sweep`); ``batch``: Batch APIs; ``supersede``: new contents."""
    root = paths.project_root()
    sweep, params_path = load_sweep(paths.resolve(params, root))
    real = sweep  # a dry run's models stand in for these: they are asked whether they read images
    if batch and not dry_run:
        sweep = batched_sweep(sweep, params_path)
    if dry_run:
        if run_dir and Path(run_dir).name != dry_name(sweep.name):
            raise ParamsError(f"--dry-run writes to runs/{sweep.name}-dry, never to another run folder: "
                              f"drop --run-dir {run_dir}")
        sweep = dry_sweep(sweep, params_path)
    problems = param_problems(sweep.endpoints())
    if problems:
        raise ParamsError("\n".join(f"{params_path}: {p}" for p in problems))
    chosen = select_cells(sweep, cells)
    _check_size(sweep, len(chosen), planned_count(sweep), params_path)  # before a huge grid is built
    scenarios = build(sweep, params_path, root)
    _check_size(sweep, len(chosen), len(scenarios), params_path)  # a dataset's size is known once read
    real_cells = select_cells(real, cells) if dry_run else chosen
    check_vision(real, real_cells, scenarios, params_path, root)  # images, and a model that reads none: refused here
    check_tools(real_cells, params_path)  # a prompt's tools, and a model known to call no functions: refused here
    folder = paths.resolve(run_dir, root) if run_dir else paths.run_dir(sweep.name, root)
    link = Link(lease_server or None, int(sweep_cap) if sweep_cap else None, bool(shared_budget), bool(lock_held))
    return Run(sweep, params_path, root, folder, scenarios, chosen, dry_run, bool(supersede or dry_run),
               bool(batch and not dry_run), link)


def batched_sweep(sweep: Sweep, params_path: Path) -> Sweep:
    """Return ``sweep`` with ``batch: true`` on every model and judge that has no ``batch:`` settings of its own."""
    data = sweep.model_dump(exclude_none=True)
    for axis in ("models", "judges"):
        for entry in data[axis]:
            entry["batch"] = entry.get("batch") or True
    try:
        return Sweep.model_validate(data)
    except ValidationError as err:  # cannot happen for a valid sweep; said plainly if it does
        raise ParamsError(f"{params_path}: --batch: {err}") from None


def dry_name(name: str) -> str:
    """Return the name of a sweep's dry run (its run folder, report and MLflow experiment): ``<name>-dry``."""
    return f"{name[:60]}-dry"


def dry_sweep(sweep: Sweep, params_path: Path) -> Sweep:
    """Return ``sweep`` answered in-process by ``dry/<id>`` stand-ins (no server, no cost), renamed ``<name>-dry``."""
    def dry(entry: Any) -> dict[str, Any]:
        data = entry.model_dump(exclude_none=True)
        for key in ("api_base", "api_key_env", "transport", "rpm", "tpm", "price", "batch"):
            data.pop(key, None)
        return {**data, **({"model": dry_model(entry.id)} if entry.model else {})}  # a checks-only judge: none

    data = sweep.model_dump(exclude_none=True)
    prompts = [{**p.model_dump(exclude_none=True), **({"user_simulator": dry(p.user_simulator)}
                                                      if p.user_simulator is not None else {})}
               for p in sweep.prompts]  # a simulated user is a model too: dry, never sent
    try:
        return Sweep.model_validate({**data, "name": dry_name(sweep.name), "models": [dry(m) for m in sweep.models],
                                     "judges": [{**dry(j), **({"embedding_model": dry_model(f"{j.id}-embeddings")}
                                                 if j.embedding_model else {})} for j in sweep.judges],
                                     "prompts": prompts})
    except ValidationError as err:  # not expected: the real sweep validated; say which file, never a traceback
        raise ParamsError(f"{params_path}: --dry-run could not stand in for its models: {err}") from err


def _check_size(sweep: Sweep, cells: int, scenarios: int | None, params_path: Path) -> None:
    """Refuse a grid that plans more answers than ``limits.max_items`` (a typo must not plan 10^8 of them)."""
    if scenarios is None:
        return
    items = max(cells, 1) * scenarios * sweep.samples
    if items > sweep.limits.max_items:
        raise ParamsError(f"{params_path}: the grid plans {items:,} answers ({cells} cells × {scenarios:,} scenarios "
                          f"× {sweep.samples:,} samples), more than limits.max_items = {sweep.limits.max_items:,}; "
                          f"shrink it, or raise limits.max_items if you mean it")


def select_cells(sweep: Sweep, cells: Any) -> list[Cell]:
    """Return the cells named by ``cells`` (None = all; a list, or a JSON/YAML/comma-separated string):
    ``model_id/prompt_id@version``, or ``model_id`` alone or ``*/prompt_id@version`` for a row or a column."""
    every = sweep.cells()
    if cells is None or cells == "" or cells == []:
        return every
    names = _as_list(cells)
    chosen, unknown = [], []
    for name in names:
        hits = [c for c in every if _matches(c, name)]
        (chosen.extend(hits) if hits else unknown.append(name))
    if unknown:
        raise ParamsError(f"unknown cell(s) {', '.join(map(repr, unknown))} for sweep {sweep.name}; "
                          f"cells are: {', '.join(c.key for c in every)}")
    return list({c.key: c for c in chosen}.values())


def _as_list(cells: Any) -> list[str]:
    if isinstance(cells, str):
        text = cells.strip()
        parsed = yaml.safe_load(text) if text.startswith("[") else [p.strip() for p in text.split(",")]
        return [str(x) for x in parsed]
    return [str(x) for x in cells]


def _matches(cell: Cell, name: str) -> bool:
    model, _, prompt = name.partition("/")
    return (model in ("*", cell.model.id)) and (not prompt or prompt in ("*", cell.prompt.key))


def shown_path(path: Path) -> str:
    """Return ``path`` relative to the working directory when it lies under it (as a user would type it)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)

