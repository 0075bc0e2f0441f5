"""One endpoint's Batch API queue: requests gathered into batches, submitted once (ledger first), polled, answered by
``custom_id``; a request a batch already holds is adopted, failed lines retried (docs/batch-apis.md)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from bench.core.errors import BatchRejected, ProviderError
from bench.core.progress import say
from bench.core.records import utc_now
from bench.models._paid import with_paid
from bench.models._transport import Reply
from bench.models.batches.ledger import BatchInfo, Ledger, endpoint_id
from bench.models.batches.lines import Request, charge, item_digest, reply_of
from bench.models.batches.lookup import META_KEY, lookup, unknown_error
from bench.models.batches.outputs import Files, odd_lines, read_files, shown
from bench.models.batch_policy import BatchPolicy
from bench.models.batches.batch_api import BatchApi, BatchState, jsonl_line
from bench.models.routing import Route

MAX_POLL_FAILURES = 30  # failed polls in a row (each after its own retries) before the waiting calls hear it
LOOKUP_RETRIES = 4  # at least this many retries of a lookup (it costs nothing; a re-ask it allows may cost)

Direct = Callable[[Route, dict, str, bool], Awaitable[Reply]]  # the client's direct path (route, body, key, allow_empty)


class Batcher:
    """One route's batch queue on one event loop (``LLM._batcher`` makes and keeps it)."""

    def __init__(self, route: Route, ledger: Ledger, *, retries: int, direct: Direct, backoff_s: float = 0.5):
        self.route, self.ledger, self.retries, self.direct = route, ledger, retries, direct
        self.policy: BatchPolicy = route.spec.batch or BatchPolicy()
        self.api = BatchApi(route)
        self.backoff_s = backoff_s
        self.queue: list[Request] = []
        self.queued_bytes = 0
        self.timer: asyncio.TimerHandle | None = None
        self.waiting: dict[str, dict[str, Request]] = {}  # local batch id → custom_id → request
        self.pollers: dict[str, asyncio.Task] = {}  # local batch id → its poller
        self.outputs: dict[str, asyncio.Task] = {}  # local batch id → its parsed files (finished batches)
        self.tasks: set[asyncio.Task] = set()
        self.endpoint = endpoint_id(route.identity)  # a digest: an api_base's credentials never reach the ledger
        self.held = ledger.holding(self.endpoint)  # what earlier processes' batches hold for this endpoint
        self.pending = ledger.pending_items(self.endpoint)  # item → (batch, custom_id) of unfinished batches
        self.mine: dict[str, BatchInfo] = {}  # key → the batch this process submitted it in, until it is answered

    async def ask(self, key: str, body: dict[str, Any], label: str | None = None, allow_empty: bool = False,
                  line_body: dict[str, Any] | None = None) -> Reply:
        """Return the reply to one request, from a batch that already holds it or a new one."""
        req = Request(key, body, label, asyncio.get_running_loop().create_future(), allow_empty, line_body=line_body,
                      item=item_digest(label, line_body or body), custom_id=key)
        info = self.held.get(key) or self.mine.get(key)  # a batch holds it already: never submit it twice
        if info is None and req.item in self.pending:  # a batch holds an earlier attempt of this item
            info, req.custom_id = self.pending[req.item]
            if info.finished or req.custom_id in self.waiting.get(info.local, {}):  # answered, or another call
                info, req.custom_id = None, key  # of this run waits on that line: a fresh request
        if info is not None:
            self._adopt(info, req)
        else:
            self._enqueue(req)
        return await req.fut

    def _enqueue(self, req: Request) -> None:
        req.custom_id = req.key
        req.line = jsonl_line(req.key, req.line_body or req.body)
        if len(req.line) > self.policy.max_bytes:
            req.fut.set_exception(BatchRejected(
                f"{self.route.spec.model}: one request is {len(req.line)} bytes, more than batch.max_bytes "
                f"({self.policy.max_bytes}); raise batch.max_bytes to the provider's limit or drop `batch:`"))
            return
        if self.queue and self.queued_bytes + len(req.line) > self.policy.max_bytes:
            self._flush()
        self.queue.append(req)
        self.queued_bytes += len(req.line)
        if len(self.queue) >= self.policy.max_requests:
            self._flush()
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(self.policy.gather_s, self._flush)

    def _flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        chunk = [r for r in self.queue if not r.fut.done()]  # a caller that gave up is not submitted
        self.queue, self.queued_bytes = [], 0
        if chunk:
            info = BatchInfo(secrets.token_hex(8), self.endpoint, self.route.spec.model,
                             [r.key for r in chunk], [r.label for r in chunk], [r.item for r in chunk], at=utc_now())
            self.waiting[info.local] = {r.key: r for r in chunk}
            self.mine.update((r.key, info) for r in chunk)
            self.pollers[info.local] = self._spawn(self._submit(info, chunk), info)

    def _spawn(self, coro: Any, info: BatchInfo | None = None, req: Request | None = None) -> asyncio.Task:
        """Run ``coro``; if it dies (a bug, a full disk, Ctrl-C), the calls waiting on ``info`` or ``req`` hear why."""
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self.tasks.discard(t)
            if t.cancelled() or t.exception() is not None:
                err = asyncio.CancelledError() if t.cancelled() else t.exception()
                if info is not None:
                    self._fail_all(info, err)
                if req is not None and not req.fut.done():
                    req.fut.set_exception(err)
        task.add_done_callback(done)
        return task

    async def _submit(self, info: BatchInfo, chunk: list[Request]) -> None:
        for req in chunk:
            req.tries += 1
        self.ledger.submitting(info)  # before the upload: a process killed from here on is found again
        try:
            file_id = await self._with_backoff(self.api.upload, f"bench-{info.local}.jsonl",
                                               b"".join(r.line for r in chunk))
        except ProviderError as err:  # no batch exists: nothing to look for on a resume
            self.ledger.finished(info, "never_created", None, None, set())
            self._fail_all(info, self._rejected(info, err) if not err.retryable else err)
            return
        self.ledger.uploaded(info, file_id)  # a lookup can match the batch by its input file
        state = await self._create(info, file_id)
        if state is not None:
            self.ledger.created(info, state.id, file_id)  # recorded before the first poll
            await self._poll(info, state)

    async def _create(self, info: BatchInfo, file_id: str) -> BatchState | None:
        """Create the batch once: after a failed create it is looked up, created again only once confirmed absent."""
        for attempt in range(self.retries + 1):
            try:
                return await self.api.create(file_id, self.policy.window, {META_KEY: info.local})  # a fresh dict
            except ProviderError as err:
                if not err.retryable:  # refused: no batch exists
                    self.ledger.finished(info, "never_created", None, None, set())
                    self._fail_all(info, self._rejected(info, err))
                    return None
                await asyncio.sleep(max(err.retry_after or 0.0, self.backoff_s * 2 ** attempt))
                try:
                    found = await self._lookup(info)
                except ProviderError as lost:  # it may exist: the ledger keeps it for a re-run to look up
                    self._fail_all(info, unknown_error(info, lost, "its creation's reply was lost"))
                    return None
                if found is not None:
                    say(f"batch {found.id} ({info.model}): the reply to its creation was lost; found at the provider")
                    return found
                if attempt == self.retries:  # confirmed: it does not exist, nothing was spent
                    self.ledger.finished(info, "never_created", None, None, set())
                    self._fail_all(info, err)
                    return None
        return None

    async def _lookup(self, info: BatchInfo) -> BatchState | None:
        """Return the provider's batch that is ``info``, or None when the provider confirms there is none."""
        async def call(fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
            return await self._with_backoff(fn, *args, tries=max(self.retries, LOOKUP_RETRIES) + 1)
        return await lookup(self.api, info, call)

    async def _with_backoff(self, call: Callable[..., Awaitable[Any]], *args: Any, tries: int | None = None) -> Any:
        """Call the provider, retrying what may succeed (429, 5xx, timeouts) with exponential backoff."""
        tries = tries or self.retries + 1
        for attempt in range(tries):
            try:
                return await call(*args)
            except ProviderError as err:
                if not err.retryable or attempt == tries - 1:
                    raise
                await asyncio.sleep(max(err.retry_after or 0.0, self.backoff_s * 2 ** attempt))
        raise AssertionError("unreachable")

    def _rejected(self, info: BatchInfo, err: ProviderError) -> Exception:
        if err.status in (400, 404, 405, 413, 422):
            return BatchRejected(f"{self.route.spec.model}: the provider refused batch {info.local} of "
                                 f"{len(info.keys)} requests before running it: {err}; nothing was spent. "
                                 f"{_REJECT_HINT}")
        return err

    def _adopt(self, info: BatchInfo, req: Request) -> None:
        """Wait for ``req`` in a batch an earlier process (or this one) submitted, without submitting it again."""
        req.tries = 1
        if info.finished:
            self._spawn(self._from_output(info, req))
            return
        self.waiting.setdefault(info.local, {})[req.custom_id] = req
        poller = self.pollers.get(info.local)
        if poller is None or poller.done():
            self.pollers[info.local] = self._spawn(self._resume(info), info)

    async def _resume(self, info: BatchInfo) -> None:
        if info.batch_id is None:  # its creation's reply never came (lost, or the run was killed): ask the provider
            try:
                found = await self._lookup(info)
            except ProviderError as err:  # cannot tell whether it exists: never risk submitting it twice
                self._fail_all(info, unknown_error(info, err, "it was being created when an earlier run stopped"))
                return
            if found is None:  # confirmed never created: nothing was spent, so submit its waiting requests anew
                waiting = self.waiting.pop(info.local, {})
                self.ledger.finished(info, "never_created", None, None, set())
                for req in waiting.values():
                    self.held.pop(req.key, None)
                    self._enqueue(req)
                return
            self.ledger.created(info, found.id, found.input_file_id)
        say(f"batch {info.batch_id} ({info.model}, {len(info.keys)} requests): adopted, submitted by an earlier "
            f"run; polling it (never submitted again)")
        await self._poll(info, None)

    async def _from_output(self, info: BatchInfo, req: Request) -> None:
        try:
            if info.local not in self.outputs:
                self.outputs[info.local] = self._spawn(self._read_files(info, info.output_file_id, info.error_file_id))
            files = await self.outputs[info.local]
        except ProviderError:  # the output file is gone (providers keep it for 30 days): ask again
            self.held.pop(req.key, None)
            self._enqueue(req)
            return
        charge(self.route, req, files, info.carrier)
        self._answer(req, files, info.status, info)

    async def _poll(self, info: BatchInfo, state: BatchState | None) -> None:
        delay, failures = self.policy.poll_s, 0
        while state is None or not state.done:
            if state is not None:
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, self.policy.poll_max_s)
            try:
                new = await self._with_backoff(self.api.retrieve, info.batch_id)
            except ProviderError as err:
                failures += 1
                if err.retryable and failures < MAX_POLL_FAILURES:
                    state = state or BatchState(info.batch_id or "", "unknown")  # never the ledger's (stale) status
                    continue  # a provider hiccup while polling: the batch runs on; keep polling
                self._fail_all(info, ProviderError(
                    f"{info.model}: batch {info.batch_id} could not be polled {failures} times in a row ({err}); its "
                    f"items are recorded failed and a re-run asks them afresh: cancel the batch in the provider's "
                    f"console first if it still runs", kind="batch_unreachable", retryable=False))
                return
            failures = 0
            if state is None or (new.status, new.completed, new.failed) != (state.status, state.completed, state.failed):
                self.ledger.status(info, new.status, new.completed, new.failed, new.total)
                say(f"batch {new.id} ({info.model}): {new.status} {new.completed + new.failed}/{new.total or len(info.keys)}"
                    + (f" ({new.failed} failed)" if new.failed else ""))
            state = new
        await self._finish(info, state)

    async def _finish(self, info: BatchInfo, state: BatchState) -> None:
        if state.status == "failed":  # refused at validation: nothing ran, nothing was billed
            self.ledger.finished(info, state.status, None, None, set())
            why = "; ".join(state.errors or []) or "no reason given"
            self._fail_all(info, BatchRejected(f"{self.route.spec.model}: batch {state.id} of {len(info.keys)} "
                                               f"requests failed validation at the provider ({why}); nothing was "
                                               f"spent. {_REJECT_HINT}"))
            return
        try:
            files = await self._read_files(info, state.output_file_id, state.error_file_id)
        except ProviderError as err:
            self._fail_all(info, err)
            return
        answered = files.answered(set(info.keys))
        waiting = self.waiting.pop(info.local, {})
        carrier = next((k for k in info.keys if k in waiting and not waiting[k].fut.done()), None)
        self.ledger.finished(info, state.status, state.output_file_id, state.error_file_id, answered,
                             conflicts={k: [shown(r) for r in rs] for k, rs in files.conflicts.items()},
                             unknown=len(files.unknown), unreadable=len(files.unreadable), carrier=carrier)
        if odd := odd_lines(files):
            say(f"batch {state.id} ({info.model}): its output held {odd}; each billed line is counted on the records")
        if state.status == "cancelled":
            say(f"batch {state.id} ({info.model}): CANCELLED at the provider after {len(answered)} of "
                f"{len(info.keys)} requests; the rest are recorded failed and a re-run asks them again")
        elif state.status == "expired":
            say(f"batch {state.id} ({info.model}): expired after {len(answered)} of {len(info.keys)} requests; "
                f"the rest are asked again ({self.policy.retry})")
        for req in waiting.values():
            self.mine.pop(req.key, None)
            charge(self.route, req, files, carrier)
            self._answer(req, files, state.status, info)

    async def _read_files(self, info: BatchInfo, output_id: str | None, error_id: str | None) -> Files:
        """Return what a batch's output file and error file say of its requests (bench.models.batches.outputs)."""
        data = [await self._with_backoff(self.api.content, f) if f else b"" for f in (output_id, error_id)]
        return read_files(data[0], data[1], set(info.keys))

    def _answer(self, req: Request, files: Files, status: str | None, info: BatchInfo) -> None:
        if req.fut.done():
            return
        reply = reply_of(self.route, req, files, status, info.batch_id)
        if isinstance(reply, ProviderError):
            self._retry(req, reply, info)
        else:
            req.fut.set_result(reply)

    def _retry(self, req: Request, err: ProviderError, info: BatchInfo) -> None:
        """Ask a failed line again (new batch or direct, per ``retry``) or fail its call for good."""
        if not err.retryable or req.tries > self.retries:
            err.attempts = req.tries
            if req.paid:  # billed lines it could not use: its failed record counts them (records.failed_usage)
                err.paid = [*(getattr(err, "paid", None) or ()), *req.paid]
            if not req.fut.done():
                req.fut.set_exception(err)
            return
        if self.policy.retry == "direct":
            self._spawn(self._direct(req))
        else:
            self._enqueue(req)

    async def _direct(self, req: Request) -> None:
        try:
            text, usage, raw = await self.direct(self.route, req.body, req.key, req.allow_empty)
        except BaseException as exc:  # noqa: BLE001 (handed to the waiting call, whatever it is)
            if not req.fut.done():
                req.fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        usage = with_paid(usage, req.paid, req.tries + usage.get("attempts", 1)) if req.paid else usage
        usage["attempts"] = req.tries + usage.get("attempts", 1)
        if not req.fut.done():
            req.fut.set_result((text, usage, raw))

    def _fail_all(self, info: BatchInfo, err: BaseException) -> None:
        for req in self.waiting.pop(info.local, {}).values():
            self.mine.pop(req.key, None)
            if not req.fut.done():
                req.fut.set_exception(err)


_REJECT_HINT = ("Fix the request the provider names, or lower batch.max_requests / batch.max_bytes to its limits, "
                "or drop `batch:` to call it directly; a re-run sends only what is not recorded yet.")
