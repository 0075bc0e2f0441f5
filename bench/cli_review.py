"""`bench review export|apply`'s arguments and action, for the `bench` command's parser: cheap to import
(bench.review is imported only when the command runs)."""

from __future__ import annotations

import argparse
import sys
from importlib import import_module
from typing import Any


def add_review_command(sub: Any) -> None:
    """Add `bench review export` and `bench review apply` to the `bench` command's subparsers."""
    s = sub.add_parser("review", help="offline review: export items to a JSON file, apply the filled-in file")
    rs = s.add_subparsers(dest="action", required=True)
    e = rs.add_parser("export", help="write the run's judgments to review as FILE.json")
    e.add_argument("run_dir", help="runs/<sweep>")
    e.add_argument("file", help="FILE.json to write")
    e.add_argument("--filter", default="all",
                   help="all (default), random, disagreement, unreviewed, failures, extreme or flagged")
    e.add_argument("--show-judges", action="store_true",
                   help="include every judge's grades and rationales (default: blind); the reviews applied from "
                        "such a file are recorded as not blind and do not calibrate the leaderboard")
    e.add_argument("--judge", metavar="ID", help="only the items this judge graded")
    e.add_argument("--rubric", metavar="ID[@VERSION]", help="only the items of this rubric")
    e.set_defaults(func=_review)
    a = rs.add_parser("apply", help="validate a filled-in FILE.json and append its reviews (all or nothing)")
    a.add_argument("run_dir", help="runs/<sweep>")
    a.add_argument("file", help="FILE.json filled in by a reviewer")
    a.set_defaults(func=_review)


def _review(args: argparse.Namespace) -> int:
    """Export a run's items to review, or apply a filled-in file."""
    reviews = import_module("bench.review.session")  # widgets and records: imported when the command runs
    session = reviews.ReviewSession(args.run_dir, reviewer=getattr(args, "reviewer", None))
    if session.reviewed.damaged:
        print(f"bench review: {session.reviewed.note()}", file=sys.stderr)
    if args.action == "export":
        n = session.export(args.file, filter=args.filter, show_judges=args.show_judges, judge=args.judge,
                           rubric=args.rubric)
        blind = ("with the judges' grades: its reviews will not be blind" if args.show_judges else
                 "blind: no judge's grade in it")
        print(f"wrote {n} entries (one per answer and rubric version) to {args.file}, {blind}; fill in each "
              f"entry's review, then: bench review apply {args.run_dir} {args.file}")
    else:
        applied = session.apply_file(args.file)  # idempotent: entries already applied are skipped
        print(f"{applied.message}; {session.reviewed.line()}")
    return 0
