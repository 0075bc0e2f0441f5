"""What a run whose scenarios hold images needs: models and judges that read them, and its images on disk."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path

from bench.config.entries import Endpoint
from bench.config.params import Cell, Sweep
from bench.config.readers import load_dataset
from bench.config.rubrics import load_rubric
from bench.config.sources import DatasetSource
from bench.core.errors import BenchError, ParamsError
from bench.core.images import missing_images, store_image
from bench.core.records import Scenario
from bench.models.providers import provider_for, takes_images

_warned: set[tuple[str, str]] = set()  # (params file, rubric) already said to show no images, in this process


def image_columns(scenarios: Iterable[Scenario]) -> list[str]:
    """Return the dataset columns the scenarios' images come from (empty: no scenario has an image)."""
    return sorted({ref["column"] for s in scenarios for ref in s.images or ()})


def check_vision(sweep: Sweep, cells: list[Cell], scenarios: list[Scenario], params_path: Path, root: Path) -> None:
    """Raise ParamsError, one line per entry, when the scenarios hold images and a model of ``cells``, or a
    judge whose rubric shows them, reads none; return at once when no scenario has an image."""
    columns = image_columns(scenarios)
    if not columns:
        _warn_nothing_shown(sweep, params_path, root)
        return
    shown = f"scenarios.dataset.images: {', '.join(columns)}"
    lines = []
    for model in {c.model.id: c.model for c in cells}.values():
        if why := _reads_none(model):
            lines.append(f"{params_path}: model {model.id} ({model.model}) {why}, but the scenarios hold images "
                         f"({shown}); leave it out of the grid (--cells), or set `images: true` on it if it does "
                         f"read images")
    for judge in sweep.judges:
        rubric = load_rubric(judge.rubric, root, params_path.parent)
        if rubric.images and judge.model is not None and (why := _reads_none(judge)):
            lines.append(f"{params_path}: judge {judge.id} ({judge.model}) {why}, but its rubric {rubric.key} shows "
                         f"the judge the scenarios' images (images: true); give it a model that reads images, "
                         f"or drop `images: true` from the rubric")
    if lines:
        raise ParamsError("\n".join(lines))


def _warn_nothing_shown(sweep: Sweep, params_path: Path, root: Path) -> None:
    """Warn, once per rubric and process, that a rubric with ``images: true`` shows its judges no image: no
    scenario of the run holds one (a generated grid, no ``scenarios.dataset.images``, or empty columns)."""
    judges: dict[str, list[str]] = {}
    for judge in sweep.judges:
        rubric = load_rubric(judge.rubric, root, params_path.parent)
        if rubric.images:
            judges.setdefault(rubric.key, []).append(judge.id)
    for key, ids in judges.items():
        if (str(params_path), key) not in _warned:
            _warned.add((str(params_path), key))
            warnings.warn(f"{params_path}: rubric {key} shows the judge the scenarios' images (images: true), but no "
                          f"scenario holds an image, so its judges ({', '.join(ids)}) are shown none; name the "
                          f"dataset's image columns (scenarios.dataset.images), or drop `images: true` from the "
                          f"rubric", UserWarning, stacklevel=3)


def _reads_none(entry: Endpoint) -> str | None:
    """Return why ``entry`` reads no images, or None when it does (or cannot be routed: the preflight says why)."""
    if entry.images is not None:
        return None if entry.images else "is set to read no images (images: false)"
    spec = entry.spec()
    try:
        return None if takes_images(spec) else f"reads no images: {provider_for(spec).no_images}"
    except BenchError:
        return None


def store_images(scenarios: list[Scenario], source: DatasetSource | None, base_dirs: list[Path], run_dir: Path) -> int:
    """Write into ``run_dir/images`` every image of ``scenarios`` it lacks (ParamsError: gone); return how many."""
    missing = missing_images(run_dir, [ref for s in scenarios for ref in s.images or ()])
    if not missing:
        return 0
    if source is not None:
        load_dataset(source, base_dirs, sink=lambda ref, data: store_image(run_dir, ref, data))
    if gone := missing_images(run_dir, missing):
        first = gone[0].get("origin") or gone[0]["file"]
        raise ParamsError(f"{source.path if source else 'the scenarios'}: {len(gone)} image(s) of the run's scenarios "
                          f"(first: {first}, column '{gone[0]['column']}') are no longer in the dataset, which "
                          f"changed since the run was opened; open the run again (re-run the cell or the command)")
    return len(missing)
