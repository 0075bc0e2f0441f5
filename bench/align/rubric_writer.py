"""The aligned rubric version `bench align` writes: ``<source id>-aligned-<n>.md`` next to the source rubric.
``provenance.key`` lets a repeat alignment find it and write nothing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench.config.rubrics import Rubric, parse_rubric
from bench.core.errors import ParamsError
from bench.core.store import atomic_write

SUFFIX = "-aligned-"


def aligned_id(source: Rubric, key: str) -> tuple[str, Path | None]:
    """Return the id to write the alignment ``key`` under, and the file already holding it (None: a new one,
    numbered after the source's earlier aligned versions: ``tip-v1-aligned-1`` gives ``tip-v1-aligned-2``)."""
    base = re.sub(rf"{SUFFIX}\d+$", "", source.id)
    folder = source.path.parent
    numbers = []
    for path in sorted(folder.glob(f"{base}{SUFFIX}*.md")):
        found = re.fullmatch(rf"{re.escape(base)}{SUFFIX}(\d+)", path.stem)
        if not found:
            continue
        numbers.append(int(found.group(1)))
        if _key_of(path) == key:
            return path.stem, path
    return f"{base}{SUFFIX}{max(numbers, default=0) + 1}", None


def write_rubric(text: str, folder: Path, rubric_id: str) -> Rubric:
    """Write the aligned rubric's ``text`` to ``folder/<rubric_id>.md`` (checked first); return it as loaded."""
    path = Path(folder) / f"{rubric_id}.md"
    rubric = parse_rubric(text, path)  # the one loader: what a sweep reads is what was checked here
    atomic_write(path, text.encode("utf-8"))
    return rubric


def reference(rubric_id: str, folder: Path, root: Path, params: Path) -> str:
    """Return how a params file names the written rubric: its id in rubrics/, else its path from the params' folder."""
    if Path(folder).resolve() == (Path(root) / "rubrics").resolve():
        return rubric_id
    target = (Path(folder) / f"{rubric_id}.md").resolve()
    try:
        return str(target.relative_to(params.parent.resolve()))
    except ValueError:
        return str(target)


def _key_of(path: Path) -> Any:
    """Return the ``provenance.key`` of a rubric file (None when it has none or is not a valid rubric)."""
    try:
        rubric = parse_rubric(path.read_text(encoding="utf-8-sig"), path)
    except (ParamsError, OSError):
        return None
    return (rubric.provenance or {}).get("key")
