"""`bench status`'s arguments, for the `bench` command's parser: cheap to import (bench.monitor, which reads run
folders, is imported only when `bench status` runs)."""

from __future__ import annotations

import argparse
from importlib import import_module
from typing import Any


def add_status_command(sub: Any) -> None:
    """Add `bench status` to the `bench` command's subparsers."""
    s = sub.add_parser("status", help="a run's state (running, finished, failed, interrupted, crashed) and progress, "
                                      "read from its run folder alone")
    s.add_argument("run", help="runs/<sweep> (or a sweep name), on this machine or a shared folder")
    s.add_argument("--json", action="store_true", help="print one JSON document (its schema: bench.monitor.SCHEMA)")
    s.add_argument("--watch", action="store_true", help="refresh until the sweep ends: in place on a terminal, "
                                                        "one line every few seconds into a pipe")
    s.add_argument("--every", type=float, default=None, metavar="S", help="seconds between two looks with --watch "
                                                                         "(default 2 on a terminal, 5 in a pipe)")
    s.set_defaults(func=_status)


def _status(args: argparse.Namespace) -> int:
    command = import_module("bench.monitor.command")  # reads run folders: imported when `bench status` runs
    return command.status_command(args.run, as_json=args.json, watch_it=args.watch, every_s=args.every)
