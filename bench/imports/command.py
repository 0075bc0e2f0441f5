"""`bench import`'s arguments, for the `bench` command's parser, and what it prints: cheap to import (the importers
load when the command runs)."""

from __future__ import annotations

import argparse
from importlib import import_module
from typing import Any

_IMPORTERS = {"verdicts": ("bench.imports.verdicts", "import_verdicts"),
              "inspect": ("bench.imports.inspect_log", "import_inspect")}


def add_import_command(sub: Any) -> None:
    """Add `bench import verdicts|inspect FILE --run-dir DIR` to the `bench` command's subparsers."""
    s = sub.add_parser("import", help="import another tool's grades as a run's records: verdicts (JSONL/CSV) or an "
                                      "Inspect AI eval log (JSON); importing twice adds nothing (docs/judges.md)")
    s.add_argument("kind", choices=list(_IMPORTERS), help="verdicts: pairwise or graded rows; inspect: an eval log")
    s.add_argument("file", help="the JSONL or CSV file of verdicts, or the Inspect log (.json)")
    s.add_argument("--run-dir", required=True, metavar="DIR", help="the run folder to add the records to")
    s.add_argument("--scale", type=_scale, default=None, metavar="LO,HI",
                   help="graded rows: the integer scale of their grades (default: the integers around those given)")
    s.set_defaults(func=lambda args: import_command(args.kind, args.file, args.run_dir, args.scale))


def _scale(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO,HI (two integers, e.g. 1,5), got {text!r}") from None
    if lo >= hi:
        raise argparse.ArgumentTypeError(f"expected LO < HI, got {text!r}")
    return lo, hi


def import_command(kind: str, path: str, run_dir: str, scale: tuple[int, int] | None = None) -> int:
    """Import ``path`` into ``run_dir``, then print what was added (and each Inspect scorer's mean); return 0."""
    module, name = _IMPORTERS[kind]
    options = {"scale": scale} if scale else {}  # graded verdicts only
    got = getattr(import_module(module), name)(path, run_dir, **options)  # pydantic records: loaded now
    added = ", ".join(f"{got[k]} {k}" for k in ("scenarios", "candidates", "judgments"))
    print(f"imported from {path} into {run_dir}: {added} added; {got['already_there']} already there")
    for scorer, m in got.get("scorers", {}).items():
        said = "no accuracy or mean" if m["log"] is None else f"{m['log']:.4g}"
        print(f"  {scorer}: mean {m['mean']:.4g} (the log's results: {said})")
    return 0
