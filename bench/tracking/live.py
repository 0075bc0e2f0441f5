"""A sweep's parent MLflow run, live: created as the sweep starts, moving while it runs, ended with its exit code.

:class:`LiveRun` works on its own thread, so the sweep never waits for MLflow; tracking never fails a sweep
(docs/tracking.md)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError, Halted
from bench.core.exit_codes import ExitCode, mlflow_status
from bench.core.records import utc_now
from bench.core.runlock import held_here, is_held
from bench.estimate import planned_progress
from bench.run import Run
from bench.tracking._console import warn
from bench.tracking._live_progress import SweepProgress
from bench.tracking.mlflow_store import _import_mlflow, mlflow_client, store_ready, tracking_uri

EVERY_ENV = "BENCH_MLFLOW_LIVE_S"  # seconds between two batches of progress metrics
EVERY_S = 10.0  # a watcher sees the sweep move; a tracking server gets one small batch per sweep every 10 s
JOIN_S = 120.0  # the most a sweep's end waits for a tracking server that does not answer
HURRIED_S = 2.0  # the most a second Ctrl-C waits for it: the run then stays RUNNING, marked crashed by the next sweep


class LiveRun:
    """The parent MLflow run of one sweep of ``run``'s folder, created and fed on a thread of its own."""

    def __init__(self, run: Run, every_s: float | None = None, *, enabled: bool = True):
        self.run, self.run_dir, self.enabled = run, Path(run.dir).resolve(), enabled
        self.code = int(ExitCode.OK)  # what the run ends with when live_run closes without an exception
        self.every_s = every_s if every_s is not None else float(os.environ.get(EVERY_ENV) or EVERY_S)
        self.run_id: str | None = None
        self.batches = 0  # progress batches logged
        self._client: Any = None
        self._t0, self._started = time.monotonic(), utc_now()
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by begin() and by stopping: the thread waits for either
        self._begun = False
        self._warned = False
        self._thread = threading.Thread(target=self._work, name="bench-live-run", daemon=True)

    def start(self) -> LiveRun:
        """Start the thread (it imports mlflow meanwhile, and waits for :meth:`begin`); return self at once."""
        self._t0, self._started = time.monotonic(), utc_now()
        if self.enabled:
            self._thread.start()
        return self

    def begin(self) -> None:
        """The sweep's stages start: mark crashed runs, create this one, log progress (a refused sweep creates none)."""
        self._begun = True
        self._wake.set()

    def ended(self, code: int) -> int:
        """Set the exit code the run ends with when :func:`live_run` closes; return ``code``."""
        self.code = code
        return code

    def parent(self, wait_s: float = JOIN_S) -> str | None:
        """Stop logging progress (a last batch first); return the run's id for the end-of-sweep logging, or None
        if it could not be created (warned: the end-of-sweep logging then creates its parent run as before)."""
        self._stop.set()
        self._wake.set()
        if not self._thread.ident:  # disabled (--no-track): nothing was created
            return None
        if self._thread.is_alive():
            self._thread.join(wait_s)
        return self.run_id if not self._thread.is_alive() else None

    def end(self, code: int, wait_s: float = JOIN_S) -> None:
        """End the run with the sweep's exit ``code``: its status (FINISHED, FAILED, KILLED) and ``bench.exit_code``."""
        if self.parent(wait_s) is None:
            return
        try:
            self._client.set_tag(self.run_id, "bench.exit_code", str(int(code)))
            self._client.set_terminated(self.run_id, mlflow_status(code))
        except Exception as err:  # tracking is never fatal
            warn(f"ending the live MLflow run of {self.run_dir}", err)

    def _work(self) -> None:
        try:
            _import_mlflow()  # 2-5 s of imports, overlapped with the sweep's preparation
            self._wake.wait()
            if not self._begun:
                return  # refused before its stages started: no run
            self._open()
        except Exception as err:  # tracking is never fatal: the end-of-sweep logging still follows
            warn(f"the live MLflow run of {self.run_dir}", err)
            return
        progress = SweepProgress(self.run_dir, _planned(self.run))
        self._log(progress)  # what the folder holds as the run appears (a resumed sweep's earlier work)
        while not self._stop.wait(self.every_s):  # at most one batch every every_s seconds (and the last one)
            self._log(progress)
        self._log(progress)  # the last counts, as the stages ended

    def _open(self) -> None:
        """Mark the folder's runs whose driver died, then create this sweep's parent run (RUNNING)."""
        mark_crashed(self.run_dir)
        self._client, exp_id = mlflow_client(self.run_dir, self.run_dir.name)
        tags = {"bench.sweep": self.run_dir.name, "bench.level": "sweep", "bench.live": "1",
                "bench.run_dir": str(self.run_dir), "bench.driver.host": socket.gethostname(),
                "bench.driver.pid": str(os.getpid()), "bench.started": self._started}
        if (budget := self.run.sweep.limits.budget_usd) is not None:
            tags["bench.budget_usd"] = str(budget)
        started_ms = int((time.time() - (time.monotonic() - self._t0)) * 1000)  # the sweep's start, not the run's
        self.run_id = self._client.create_run(exp_id, start_time=started_ms, tags=tags,
                                              run_name=self.run_dir.name).info.run_id

    def _log(self, progress: SweepProgress) -> None:
        """Log the progress metrics as one batch, at ``step`` = whole seconds since the sweep started."""
        from mlflow.entities import Metric  # noqa: PLC0415 (mlflow: imported by the thread's _open already)

        try:
            now, step = int(time.time() * 1000), int(time.monotonic() - self._t0)
            metrics = [Metric(k, float(v), now, step) for k, v in progress.metrics().items()]
            self._client.log_batch(self.run_id, metrics=metrics)
            self.batches += 1
        except Exception as err:  # a store that went away: said once, tried again at the next batch
            if not self._warned:
                self._warned = True
                warn(f"progress metrics of the live MLflow run of {self.run_dir}", err)


def _planned(run: Run) -> Any:
    """Return what the sweep plans (bench.estimate.planned_progress), or None when it cannot be worked out here."""
    try:
        return planned_progress(run)
    except (BenchError, OSError, ValueError):
        return None


@contextmanager
def live_run(run: Run, *, enabled: bool = True) -> Iterator[LiveRun]:
    """Open the live MLflow run of a sweep holding ``run``'s lock; on leaving, end it with the code set by
    :meth:`LiveRun.ended`, or with what an exception means (Ctrl-C 130, a ``Halted`` its own code, a bench error
    2, anything else 1). ``enabled=False`` (``--no-track``) creates and logs nothing."""
    live = LiveRun(run, enabled=enabled).start()
    try:
        yield live
    except KeyboardInterrupt as err:  # a second Ctrl-C (bench.sweep.executions.SweepInterrupted) waits little
        live.end(ExitCode.INTERRUPTED, HURRIED_S if getattr(err, "hurried", False) else JOIN_S)
        raise
    except Halted as err:
        live.end(err.exit_code)
        raise
    except BenchError:
        live.end(ExitCode.BAD_INPUT)
        raise
    except BaseException:
        live.end(ExitCode.CRASHED)
        raise
    live.end(live.code)


def mark_crashed(run_dir: str | Path) -> bool:
    """Set KILLED (tag ``bench.ended = crashed``) every RUNNING sweep run of ``run_dir`` whose driver is dead (the
    folder's lock is free, or ours); return whether one was. A lock taken on another host cannot be seen: nothing is
    marked. Read-only on a folder never tracked."""
    run_dir = Path(run_dir).resolve()
    own = "MLFLOW_TRACKING_URI" not in os.environ
    if own and not (run_dir / "mlflow.db").exists():
        return False
    if not held_here(run_dir) and is_held(run_dir) is not False:
        return False  # a live driver (its run is running), or one this machine cannot see: not ours to end
    try:
        client = store_ready(run_dir).MlflowClient(tracking_uri(run_dir))
        exp = client.get_experiment_by_name(f"bench/{run_dir.name}")
        if exp is None:
            return False
        running = client.search_runs([exp.experiment_id], max_results=1000,
                                     filter_string="attributes.status = 'RUNNING' and tags.`bench.live` = '1'")
        crashed = [r.info.run_id for r in running if own or r.data.tags.get("bench.run_dir") == str(run_dir)]
        for run_id in crashed:  # the folder's path is compared here, never spliced into MLflow's filter language
            client.set_tag(run_id, "bench.ended", "crashed")
            client.set_terminated(run_id, "KILLED")
    except Exception as err:  # tracking is never fatal
        warn(f"marking the crashed MLflow runs of {run_dir}", err)
        return False
    return bool(crashed)
