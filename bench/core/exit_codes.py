"""`bench sweep`'s exit codes as one table: what each means and what a watcher or orchestrator does with it.
Standard library only; ``python -m bench.core.exit_codes CODE`` prints the action."""

from __future__ import annotations

import sys
from enum import Enum, IntEnum


class ExitCode(IntEnum):
    """The exit codes of `bench sweep`, the one table of them (EXIT_* elsewhere are its values as plain ints)."""

    OK = 0  # every planned answer and judgment succeeded
    CRASHED = 1  # an execution crashed or the report failed: the run is incomplete
    BAD_INPUT = 2  # nothing started: params, preflight, a locked run folder, …
    FAILED_ITEMS = 3  # the sweep ran to its end with items still failed: a re-run asks only those
    BUDGET = 4  # limits.budget_usd reached (or would be): raise the budget to continue
    GATE_FAILED = 5  # a gate of the params file's gates: failed; the run is otherwise complete
    CANNOT_DECIDE = 6  # a gate cannot decide: too few scenarios, a run still being written or damaged
    INTERRUPTED = 130  # Ctrl-C: what was answered is kept; a re-run resumes
    READER_GONE = 141  # the reader of its output went away (128 + SIGPIPE)


class Action(str, Enum):
    """What an orchestrator does with a sweep's exit code."""

    SUCCESS = "success"  # the task succeeded
    RETRY = "retry"  # run the same command again (later): it resumes, asking only what is left or failed
    FAIL = "fail"  # the task failed, and running it again unchanged would not help: no retry


_ACTIONS = {ExitCode.OK: Action.SUCCESS,
            ExitCode.CRASHED: Action.FAIL,  # a notebook raised: a bug or a broken setup, to be read first
            ExitCode.BAD_INPUT: Action.FAIL,
            ExitCode.FAILED_ITEMS: Action.RETRY,  # transient provider errors, most often: a re-run asks only those
            ExitCode.BUDGET: Action.FAIL,  # retrying spends nothing more: the budget must be raised by a person
            ExitCode.GATE_FAILED: Action.FAIL,  # the run is complete and worse than its gates: a finding, not a fault
            ExitCode.CANNOT_DECIDE: Action.FAIL,  # more scenarios or a whole run are needed: a person decides
            ExitCode.INTERRUPTED: Action.RETRY,  # stopped from outside (Ctrl-C, a task timeout): resume it
            ExitCode.READER_GONE: Action.FAIL}

_MLFLOW = {ExitCode.OK: "FINISHED", ExitCode.BUDGET: "KILLED", ExitCode.INTERRUPTED: "KILLED"}  # else FAILED


def task_action(code: int) -> Action:
    """Return what an orchestrator does with exit ``code``; a code bench never exits with (a signal's, say) fails."""
    try:
        return _ACTIONS[ExitCode(code)]
    except ValueError:
        return Action.FAIL


def mlflow_status(code: int) -> str:
    """Return how a sweep's MLflow run ends with exit ``code``: FINISHED (0), KILLED (4: the budget; 130:
    interrupted) or FAILED (every other code: 1, 2, 3, 5, …)."""
    try:
        return _MLFLOW.get(ExitCode(code), "FAILED")
    except ValueError:
        return "FAILED"


def main(argv: list[str] | None = None) -> int:
    """Print the action of the exit code given as the one argument; return 0 (2 when it is not a number)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].lstrip("-").isdigit():
        print("usage: python -m bench.core.exit_codes CODE  (prints success, retry or fail)", file=sys.stderr)
        return 2
    print(task_action(int(args[0])).value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
