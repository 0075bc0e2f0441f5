"""The exception tree: every error a researcher can see says what went wrong and what to do."""

from __future__ import annotations

from bench.core.secrets import redact


class BenchError(Exception):
    """Base of every error bench raises on purpose."""


class ParamsError(BenchError):
    """A params file, rubric or dataset is invalid; the message names the file and the key."""


class PreflightError(BenchError):
    """The run cannot start (missing keys, unreachable endpoints, unknown models): ``problems``; nothing was spent."""

    def __init__(self, problems: list[str]):
        # an api_base's user:password@ is never echoed; a finding two specs share (one model string as answerer
        # and judge, other params) is said once
        self.problems = list(dict.fromkeys(redact(p) for p in problems))
        if len(self.problems) == 1:  # one problem: one line
            super().__init__(f"preflight: {self.problems[0]} (nothing was called)")
            return
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"preflight found {len(self.problems)} problems; nothing was called:\n{lines}")


class ProviderError(BenchError):
    """A model call failed for good (after its retries). ``kind`` is a short reason (``rate_limit``, ``server``,
    ``timeout``, ``malformed``, ``auth``, …); ``retryable`` says whether a later resume may succeed."""

    def __init__(self, message: str, *, kind: str, status: int | None = None,
                 retryable: bool = False, attempts: int = 1, retry_after: float | None = None):
        super().__init__(redact(message))  # its text reaches records, warnings and logs: never a credential
        self.kind = kind
        self.status = status
        self.retryable = retryable
        self.attempts = attempts  # requests this call sent (0: it shared one in flight, or failed before sending)
        self.retry_after = retry_after
        self.shared = False  # True: the failure of another call's identical request, shared while in flight


class LocalModelError(BenchError):
    """The embedded model cannot be served (package missing, too big, port taken, failed start)."""


class StoreError(BenchError):
    """The run store cannot be read or written (permissions, corrupt records in the middle)."""


class WritesFailed(StoreError):
    """A stage stopped because its records could not be written (disk full, file size limit, quota)."""


class CacheWriteWarning(RuntimeWarning):
    """The response cache could not be written: its replies stay in memory until it can be."""


class JudgeParseError(BenchError):
    """A judge reply could not be turned into a valid judgment."""


class Halted(BenchError):
    """A stage stopped starting new items for a reason that is not an item's own failure.
    Unstarted items get no record, so a re-run picks them up; ``exit_code`` is what `bench sweep` exits with."""

    exit_code = 1

    def _render_traceback_(self) -> list[str]:  # a notebook shows the message, not a traceback (IPython's hook)
        return [f"{type(self).__name__}: {self}"]


class BudgetReached(Halted):
    """``limits.budget_usd`` is spent (or the next paid request would pass it): no paid call starts."""

    exit_code = 4  # bench.core.outcome.EXIT_BUDGET


class Stopping(Halted):
    """A first Ctrl-C (bench.stage_runs.StageStop): no new request is sent; those in flight finish and are kept."""

    exit_code = 130  # bench.core.outcome.EXIT_INTERRUPTED


class BatchRejected(Halted):
    """A provider's Batch API refused a batch before running it; nothing was spent."""

    exit_code = 2  # bench.core.outcome.EXIT_BAD_INPUT
