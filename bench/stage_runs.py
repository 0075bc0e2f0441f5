"""The stages driven on a run: `run_collect` and `run_judge`, what notebooks, `bench sweep` and the pilot call.

A stage run locks the run folder, checks its contents, preflights every model, opens the seam client
(:func:`make_llm`), runs the stage and closes it; an interrupt becomes one line (:class:`Interrupted`)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from bench.collect import CollectResult, answer_counts, collect_stage, simulator_specs
from bench.config.rubrics import snapshot_rubric
from bench.config.scenarios import write_scenarios
from bench.config.vision import store_images
from bench.core.digests import Digest, check_digests, supersede
from bench.core.errors import CacheWriteWarning, Stopping, WritesFailed
from bench.core.images import IMAGE_FOLDER
from bench.core.journal import Journal, settle, unclaimed_keys
from bench.core.migrate import migrate_run
from bench.core.progress import Progress, configure, in_kernel, requests_in_flight, say
from bench.core.records import Judgment
from bench.core.rescue import import_rescued
from bench.core.runlock import run_lock
from bench.core.spend import open_lost
from bench.core.store import RunStore
from bench.core.writer import Halt, RecordWriter
from bench.judge.grader import Judge
from bench.judge.judgments import JudgeResult, judge_specs, judge_stage, judgment_counts, load_judges
from bench.judge.stream import JudgeStream
from bench.models.budget import Budget
from bench.models.cache import open_cache
from bench.models.client import LLM
from bench.models.preflight import preflight
from bench.models.routing import ModelSpec
from bench.run import Run, shown_path


def make_llm(run: Run, max_concurrency: int | None = None) -> LLM:
    """Return the seam client for this run: the params' limits (or an override of the cap) and the shared cache."""
    lim = run.sweep.limits
    cap = int(max_concurrency) if max_concurrency else lim.max_concurrency
    llm = LLM(lim.model_copy(update={"max_concurrency": cap}), cache=open_cache(root=run.root))
    llm.batch_dir = run.dir / "batches"  # the provider batches of batched models (bench.models.batches.ledger)
    llm.journal = Journal(run.dir)  # the requests in flight (a file only once one is sent): see bench.core.journal
    llm.image_folder = run.dir / IMAGE_FOLDER  # the dataset's images, which requests carry (bench.core.images)
    link = run.link  # what the sweep's driver shares with this execution (none in a notebook of one's own)
    llm.lease_server, llm.sweep_cap = link.lease_server, link.sweep_cap
    if lim.budget_usd is not None:  # every paid request reserves its worst case first (bench.models.budget)
        held = link.lease_server if link.shared_budget else None  # the sweep's server holds it for every execution
        llm.budget = Budget(lim.budget_usd, run.dir, shown_path(run.params_path), held)
    return llm


@contextlib.asynccontextmanager
async def _stage_llm(run: Run, max_concurrency: int | None, images: bool = True) -> AsyncIterator[LLM]:
    """The seam client of one stage: counts what an earlier stop makes this run ask again, closes cleanly.

    Settles leftover request journals first and stores missing dataset images (when ``images``); at the end
    flushes the cache and removes this process's journal, unless interrupted."""
    if images:
        store_images(run.scenarios, run.sweep.scenarios.dataset, [run.params_path.parent, run.root], run.dir)
    llm = make_llm(run, max_concurrency)
    settle(run.dir, llm.cache)
    llm.unclaimed = unclaimed_keys(run.dir)  # paid by a killed process, perhaps never recorded: counted once taken
    llm.lost = open_lost(run.dir)  # in flight at a kill, reply lost: the reply to the same request claims it
    interrupted = writes_failed = False
    try:
        yield llm
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
        raise
    except WritesFailed:
        writes_failed = True
        raise
    finally:
        with warnings.catch_warnings():
            if writes_failed:  # the disk that stopped the stage stops the cache too: one message says it
                warnings.simplefilter("ignore", CacheWriteWarning)
            await llm.aclose()
        llm.journal.close(keep=interrupted)


def called_specs(run: Run, judges: list[Judge]) -> list[ModelSpec]:
    """Return the models a run calls, as the preflight checks them: its cells', their simulated users', ``judges'``."""
    return [c.model.spec() for c in run.cells] + simulator_specs(run.cells) + judge_specs(judges)


def prepare(run: Run, *, judges: bool = True, log_supersede: bool = True) -> list[tuple[Digest, str]]:
    """Check contents and preflight every model; write scenarios.jsonl and each judge's rubric; call nothing.
    Return the contents ``--supersede`` changes, logged here unless ``log_supersede=False`` (the caller logs them)."""
    every = load_judges(run)
    changed = check_contents(run, every if judges else [])
    preflight(called_specs(run, every))
    RunStore(run.dir).ensure_writable()
    if log_supersede:
        supersede(run.dir, changed, shown_path(run.params_path))
    import_rescued(run.dir)  # records a full disk made an earlier run save outside the run folder
    rekey(run)
    write_scenarios(run.dir, run.scenarios)
    for judge in every:
        snapshot_rubric(judge.rubric, run.dir)
    return changed


def check_contents(run: Run, judges: list[Judge]) -> list[tuple[Digest, str]]:
    """Return the cells, ``judges`` and rubric versions whose content differs from the run folder's under the same
    name, when ``run.supersede`` allows it; else ParamsError naming each (bench.core.digests)."""
    planned = [c.digest for c in run.cells] + [d for j in judges for d in j.digests]
    return check_digests(run.dir, planned, shown_path(run.params_path), supersede=run.supersede)


def rekey(run: Run) -> None:
    """Re-key records written before ids included the endpoint (see bench.core.migrate); says so when it did."""
    n = migrate_run(run.dir, {m.id: m for m in run.sweep.models}, {j.id: j for j in run.sweep.judges})
    if n:
        print(f"{run.dir}: re-keyed {n} records written before ids included the endpoint "
              f"(originals in {run.dir / '.schema1-backup'})", flush=True)


def shown_progress(progress: str, every_s: float | None = None) -> str:
    """Return the progress mode a stage shows ("sweep": text lines marked for `bench sweep`), having configured this
    process's marking and the lines' interval ``every_s`` (None: by stream)."""
    configure(marked=progress == "sweep", every_s=every_s)
    return "text" if progress == "sweep" else progress


async def run_collect(run: Run, *, max_concurrency: int | None = None, shard: str | None = None,
                      progress: str = "auto", progress_every_s: float | None = None,
                      judge: bool = False) -> CollectResult:
    """Run the collect stage for the run's cells; return its CollectResult.
    ``judge=True`` grades each new candidate as it arrives, in the same loop and cap (what `bench sweep` does)."""
    progress = shown_progress(progress, progress_every_s)
    pipelined = bool(judge and run.sweep.judges)
    with _interrupts_say(run, answers=True, judges=pipelined, stage="run_collect") as stop, \
            run_lock(run.dir, held=run.link.lock_held):
        prepare(run, judges=pipelined)
        async with _stage_llm(run, max_concurrency) as llm:
            stop.watch(llm)
            if not pipelined:
                result = await collect_stage(run, llm, shard=shard or None, progress=progress)
            else:
                result = await _collect_and_judge(run, llm, shard or None, progress)
    if progress != "none":
        say(result)  # the stage's one line (what `bench sweep` shows in the terminal)
    return result


async def _collect_and_judge(run: Run, llm: LLM, shard: str | None, progress: str) -> CollectResult:
    judges = load_judges(run)
    store = RunStore(run.dir, shard=shard)
    halt = Halt()  # a failed write of either stage stops both from issuing calls
    writer = RecordWriter(store, halt=halt)
    # one bar per judge, its total growing as answers arrive; "judging" once collect is done and the rest is graded
    bar = Progress("judge", {j.entry.id: 0 for j in judges}, mode=progress, growing=True,
                   in_flight=requests_in_flight(llm))

    def emit(j: Judgment) -> None:
        writer.add(j)
        bar.update(j.judge_id, failed=not j.ok)

    stream = JudgeStream(run, llm, judges, emit, store.done_ids(Judgment), halt=halt, planned=bar.grow)
    writer_task = asyncio.ensure_future(writer.run())
    calls0, t0 = llm.calls, time.monotonic()
    cancelled = False
    try:
        result = await collect_stage(run, llm, shard=shard, progress=progress, sink=stream.feed, halt=halt,
                                     expect=stream.expect)
        bar.phase("judging")
        await stream.drain()
        # every request of the session, the grades sent after the last answer too (collect_stage's count ends there)
        result.calls, result.wall_s, result.calls_of = llm.calls - calls0, time.monotonic() - t0, \
            "answers and their grades"
    except asyncio.CancelledError:  # a second Ctrl-C: the gradings in flight are not waited for either
        cancelled = True
        raise
    finally:  # no grading outlives the session: after a halt (a failed write, a first Ctrl-C) paid ones finish
        await stream.settle(cancel=cancelled or not halt)
        bar.close()
        writer.stop()
        await writer_task
        writer.flush()
    halt.check()  # one message for both stages: the error, what was saved where, what to do
    return result


async def run_judge(run: Run, *, judges: str | Iterable[str] | None = None, max_concurrency: int | None = None,
                    shard: str | None = None, progress: str = "auto", progress_every_s: float | None = None,
                    failed_since: str | None = None) -> JudgeResult:
    """Run the judge stage on the run's stored candidates; return its JudgeResult.
    ``judges``: ids to run (None: all); failures are asked again, except those failed since ``failed_since``."""
    progress = shown_progress(progress, progress_every_s)
    chosen = load_judges(run, judges)
    preflight(judge_specs(chosen))
    with _interrupts_say(run, answers=False, judges=chosen, stage="run_judge") as stop, \
            run_lock(run.dir, held=run.link.lock_held):
        import_rescued(run.dir)
        rekey(run)
        supersede(run.dir, check_contents(run, chosen), shown_path(run.params_path))  # else refused: exit 2
        async with _stage_llm(run, max_concurrency, images=any(j.rubric.images for j in chosen)) as llm:
            stop.watch(llm)
            result = await judge_stage(run, llm, chosen, shard=shard or None, progress=progress,
                                       failed_since=failed_since)
    if progress != "none":
        say(result)  # the stage's one line (what `bench sweep` shows in the terminal)
    return result


class Interrupted(asyncio.CancelledError):
    """A stage stopped by an interrupt; its message is one line: what was saved, what is left, how to resume.
    Notebooks show that line, not a traceback; as a CancelledError it still cancels its task."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def interrupted_line(run: Run, resume: str, *, answers: bool = True, judges: bool | list[Judge] = True,
                     lost: str = "") -> str:
    """Return the line an interrupt prints: saved of planned, replies ``lost``, what is left, ``resume``."""
    saved, left = [], []
    if answers and run.sweep.collects:
        done, planned = answer_counts(run)
        saved.append(f"{done} of {planned} answers")
        left += [f"{planned - done} answers"] if planned > done else []
    judges = load_judges(run) if judges is True else judges or []
    if judges:
        done, planned = judgment_counts(run, judges)
        saved.append(f"{done} of {planned} judgments")
        left += [f"{planned - done} judgments"] if planned > done else []
    return (f"interrupted: {' and '.join(saved) or 'nothing'} saved in {shown_path(run.dir)}; {lost and lost + '; '}"
            f"{' and '.join(left) or 'nothing'} left; {resume}")


LOST = re.compile(r"(\d+) repl(?:y|ies) in flight lost")  # what lost_clause says: a sweep's driver sums its kernels'


def lost_clause(n: int) -> str:
    """Return the words saying ``n`` replies in flight were given up ("" for none)."""
    return f"{n} {'reply' if n == 1 else 'replies'} in flight lost (paid, and asked again on resume)" if n else ""


def lost_in(text: str) -> int:
    """Return the replies in flight a stage's interrupted line says it lost (0 if none)."""
    return sum(int(n) for n in LOST.findall(text or ""))


DRAIN_S = 10.0  # how long a first Ctrl-C waits for the requests in flight before giving them up


class StageStop:
    """Ctrl-C in a stage (a terminal's, JupyterLab's "Interrupt", a sweep driver's SIGINT).

    The first sends nothing new and lets what is in flight be saved (at most :data:`DRAIN_S`); a second, or that
    time spent, cancels the stage at once (``lost`` counts the replies given up)."""

    def __init__(self) -> None:
        self.lost, self.llm, self.task, self.timer = 0, None, None, None
        self.previous: Any = None  # the SIGINT handler before the stage took it (set back by close)

    def watch(self, llm: LLM) -> None:
        """Take the SIGINT of the running task's stage, until :meth:`close`."""
        self.llm, task, previous = llm, asyncio.current_task(), signal.getsignal(signal.SIGINT)
        if task is None or threading.current_thread() is not threading.main_thread():
            return
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._pressed)
        except (RuntimeError, ValueError, NotImplementedError):  # a loop without signal support
            return
        self.task, self.previous = task, previous or signal.default_int_handler

    def _pressed(self) -> None:
        if self.llm.stopping:
            self._give_up("Ctrl-C again")
            return
        self.llm.stopping = True
        say(f"Ctrl-C: no new request is sent; waiting up to {DRAIN_S:.0f}s for the {requests_in_flight(self.llm)()} "
            f"in flight to be answered and saved (Ctrl-C again: stop at once, losing them)")
        self.timer = asyncio.get_running_loop().call_later(DRAIN_S, self._give_up, f"still in flight after "
                                                                                   f"{DRAIN_S:.0f}s")

    def _give_up(self, why: str) -> None:
        if not self.task.done() and not self.task.cancelling():  # once: a cancelled stage still closes cleanly
            self.lost = requests_in_flight(self.llm)() or 0
            say(f"{why}: stopping at once; the {self.lost} requests in flight are given up (their replies are lost)")
            self.task.cancel()

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.task is not None:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
            signal.signal(signal.SIGINT, self.previous)
            self.task = None


@contextlib.contextmanager
def _interrupts_say(run: Run, *, answers: bool, judges: bool | list[Judge], stage: str) -> Iterator[StageStop]:
    """Take Ctrl-C during a stage (:class:`StageStop`) and turn the interrupt into one-line Interrupted."""
    stop = StageStop()
    try:
        yield stop
    except Interrupted:
        raise
    except (KeyboardInterrupt, asyncio.CancelledError, Stopping):
        again = "run this cell again to resume" if in_kernel() else f"call bench.{stage} again to resume"
        lost = lost_clause(stop.lost)
        try:
            line = interrupted_line(run, again, answers=answers, judges=judges, lost=lost)
        except Exception:  # counting must never hide the interrupt itself
            line = f"interrupted: what was answered is saved in {shown_path(run.dir)}; {lost and lost + '; '}{again}"
        raise Interrupted(line) from None
    finally:
        stop.close()
