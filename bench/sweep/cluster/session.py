"""A sweep on a Dask cluster: ``bench sweep PARAMS --cluster ADDRESS`` (or ``DASK_SCHEDULER_ADDRESS``, ``local:N``).

:class:`ClusterSession` connects (or starts ``local:N``), serves every cap from one token-guarded lease server,
hands workers their secrets and checks them before anything is paid. A plain ``tcp://`` scheduler gets a
one-line warning (docs/cluster.md)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

from bench.core.addresses import host_of, is_loopback
from bench.core.errors import BenchError, ParamsError
from bench.core.paths import CACHE_ENV, cache_path
from bench.core.store import atomic_write, os_reason
from bench.models import ratelimit
from bench.models.budget import sweep_budget
from bench.run import Link, Run, shown_path
from bench.sweep.cluster import worker_secrets
from bench.sweep.cluster.local_cluster import PrivateCluster
from bench.sweep.cluster.probe import TOKEN_FILE, Expected, check_worker, source_digest, version
from bench.sweep.executions import STAGES

ADDRESS_ENV = "DASK_SCHEDULER_ADDRESS"
TLS_ENV = "DASK_DISTRIBUTED__COMM__TLS__"  # + CA_FILE, CLIENT__CERT, CLIENT__KEY: Dask's own TLS settings
CONNECT_S = 20.0  # how long to try reaching a scheduler before saying it is unreachable (--cluster-wait)
# the driver's settings a kernel on a worker must share, which are a user's (the rest are papermill parameters:
# bench.sweep.executions.notebook_parameters): where runs live, the embedded model
PASSED_ON = ("BENCH_RUNS", "BENCH_LOCAL_API_BASE")


class ClusterLost(BenchError):
    """The scheduler went away mid-sweep (what was answered is saved; a re-run resumes)."""


def cluster_address(option: str | None) -> str | None:
    """Return the cluster a sweep runs on: ``--cluster``, else ``$DASK_SCHEDULER_ADDRESS``, else None (local)."""
    return option or os.environ.get(ADDRESS_ENV) or None


class ClusterSession:
    """A connected Dask client (or a started ``LocalCluster``), its probed workers and the sweep's lease server."""

    def __init__(self, spec: str, run: Run, wait_s: float | None = None):
        self.spec, self.run = spec, run
        self.wait_s = wait_s or CONNECT_S  # how long to try reaching the scheduler, then one of its workers
        self.client: Any = None
        self.local: Any = None  # the PrivateCluster of ``local:N`` (bench.sweep.cluster.local_cluster)
        self.server: ratelimit.LeaseServer | None = None
        self.workers: dict[str, dict[str, str]] = {}
        self.sweep = secrets.token_hex(6)  # this sweep's id, in each of its attempt files
        self.stop = f"bench-stop-{self.sweep}"  # a distributed.Event: set by a Ctrl-C, seen by every task
        self.secrets = f"{worker_secrets.PLUGIN_PREFIX}{self.sweep}"  # the worker plugin with the token and keys
        self.registered = False
        self.share_error = ""  # why the worker plugin could not be sent to every worker
        self.expected: Expected | None = None

    @property
    def address(self) -> str:
        return self.client.scheduler.address if self.client is not None else self.spec

    @property
    def loopback(self) -> bool:
        """Whether every worker is on this machine (``local:N``, or a scheduler on 127.0.0.1)."""
        return self.spec.startswith("local:") or is_loopback(host_of(self.spec))

    @property
    def encrypted(self) -> bool:
        """Whether the scheduler is TLS (``local:N`` always is): only then are provider keys sent to workers."""
        return self.spec.startswith(("local:", "tls://"))

    def __enter__(self) -> "ClusterSession":
        if not self.encrypted and not self.spec.startswith("local:"):
            print(plain_tcp_warning(self.spec), file=sys.stderr, flush=True)
        try:
            self._connect()
            self.server = ratelimit.LeaseServer(self.run.sweep.limits.rate_window_s, host=self._lease_host(),
                                                budget=sweep_budget(self.run.sweep.limits.budget_usd, self.run.dir, self.run.root))
            self.server.start()
            self._share_secrets()
            self._probe()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(now=getattr(exc[1], "hurried", False))  # a second Ctrl-C: local:N workers killed, not waited for

    def close(self, now: bool = False) -> None:
        if self.registered:  # every worker forgets the token and the keys
            worker_secrets.unregister(self.client, self.secrets)
            self.registered = False
        if self.server is not None:
            self.server.stop()
        for thing in (self.client, self.local):
            if thing is not None:
                with contextlib.suppress(Exception):  # a scheduler already gone: nothing left to close
                    thing.close(now) if thing is self.local else thing.close()
        self.client = self.local = self.server = None

    def slots(self) -> int:
        """Return the executions the cluster runs at once: its workers' threads (at least 1)."""
        try:
            return max(1, sum(self.client.nthreads().values()))
        except (OSError, TimeoutError):  # the scheduler went away: the stage's own wait says so
            return 1

    def cache_folder(self) -> str:
        """Return the response cache folder every worker's kernel and the driver's estimate use (the driver's)."""
        return str(cache_path(self.run.root))

    def link(self) -> Link:
        """Return what every execution is told: the lease server, the sweep's cap, the budget, the lock held."""
        assert self.server is not None and self.server.address
        return Link(self.server.address, self.run.sweep.limits.max_concurrency, self.server.budget is not None,
                    lock_held=True)

    def kernel_env(self) -> dict[str, str]:
        """Return the variables every execution's task carries for its kernel: the cache folder, where runs live, the
        embedded model; never a secret (bench.sweep.cluster.worker_secrets carries those)."""
        env: dict[str, str] = {}
        for key in PASSED_ON:
            if os.environ.get(key) and (key != "BENCH_LOCAL_API_BASE" or self.loopback):
                env[key] = os.environ[key]
        env[CACHE_ENV] = self.cache_folder()  # named, not inherited: a local:N worker has the driver's $BENCH_CACHE
        return env

    def _connect(self) -> None:
        from distributed import Client  # noqa: PLC0415 (distributed: 1 s of imports; the `cluster` extra)

        _quiet_dask()

        if self.spec.startswith("local:"):
            n = self.spec.removeprefix("local:")
            if not n.isdigit() or int(n) < 1:
                raise BenchError(f"--cluster {self.spec}: expected local:N with N ≥ 1 worker processes (e.g. local:4)")
            names = worker_secrets.secret_names(tuple(os.environ), worker_secrets.declared_key_vars(self.run))
            self.local = PrivateCluster(int(n), names)
            self.client = self.local.start().client
            return
        security = self._tls()
        wait_s = self.wait_s
        try:
            self.client = Client(self.spec, timeout=f"{wait_s}s", security=security)
        except (OSError, TimeoutError, ValueError) as exc:
            raise BenchError(f"cannot reach the Dask scheduler at {self.spec} ({_reason(exc)}); start it (dask "
                             f"scheduler), or fix --cluster / {ADDRESS_ENV}; nothing was run") from None
        try:
            self.client.wait_for_workers(1, timeout=wait_s)
        except TimeoutError:
            raise BenchError(f"the Dask scheduler at {self.spec} has no worker after {wait_s:.0f}s; start some "
                             f"(dask worker {self.spec}) and run the sweep again; nothing was run") from None

    def _probe(self) -> None:
        """Check every worker (bench.sweep.cluster.probe); refuse, naming each worker that cannot run the sweep."""
        self.run.dir.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(16)
        atomic_write(self.run.dir / TOKEN_FILE, token.encode())
        assert self.server is not None and self.server.address and self.server.token
        files = tuple(str(self.run.root / "notebooks" / nb) for nb in (*STAGES.values(), "03_analyze.ipynb"))
        self.expected = Expected(version(), source_digest(), str(self.run.dir), token,
                                 (*files, str(self.run.params_path)), self.server.address, self.secrets)
        answers = self.client.run(check_worker, self.expected, on_error="return")
        problems = []
        for worker, got in sorted(answers.items()):
            if isinstance(got, BaseException):
                problems.append(f"{worker} cannot run bench ({type(got).__name__}: {got}); install bench "
                                f"{version()} there (pip install 'bench[cluster]' from this checkout)")
            elif got["problem"]:
                problems.append(f"{worker} ({got['hostname']}) {got['problem']}")
            self.workers[worker] = got if isinstance(got, dict) else {}
        if self.share_error and not problems:
            problems.append(f"a worker could not load the sweep's worker plugin ({self.share_error})")
        if problems:
            raise BenchError("cluster check failed before any model call:\n  " + "\n  ".join(problems) +
                             f"\nevery worker needs the same bench, the project and the run folder {self.run.dir} "
                             f"at the same paths (writable), and a way to this machine (docs/cluster.md)")

    def _share_secrets(self) -> None:
        """Send every worker the lease token, and over TLS the provider keys, in a worker plugin (memory only)."""
        assert self.server is not None and self.server.token
        values = {ratelimit.TOKEN_ENV: self.server.token}
        if self.encrypted:
            values.update(worker_secrets.provider_keys(self.run))
        self.registered = True  # the scheduler keeps it even when a worker refuses it: removed at the end
        try:
            worker_secrets.register(self.client, self.secrets, values)
        except Exception as exc:  # a worker that cannot load it (no bench there): the check names each one
            self.share_error = _reason(exc)

    def _tls(self) -> Any:
        """Return the Security to reach a ``tls://`` scheduler with, or None for ``tcp://``.

        Certificates come from the params' ``cluster:`` section, else Dask's configuration; an unreadable one stops
        the sweep naming the key and the file."""
        import dask  # noqa: PLC0415 (the `cluster` extra)
        from distributed.security import Security  # noqa: PLC0415

        section, params = self.run.sweep.cluster, self.run.params_path
        if not self.spec.startswith("tls://"):
            if section is not None:
                raise ParamsError(f"{shown_path(params)}: cluster: certificates are given, but the scheduler {self.spec} is not "
                                  f"tls://; pass --cluster tls://<host>:<port>, or remove the cluster: section")
            return None
        if section is not None:
            files = {key: (f"cluster.{key}", str((params.parent / value).resolve()) if value else None)
                     for key, value in section.model_dump().items()}
        else:
            files = {key: (f"{TLS_ENV}{var}", dask.config.get(f"distributed.comm.tls.{path}", default=None))
                     for key, var, path in (("tls_ca_file", "CA_FILE", "ca-file"),
                                            ("tls_client_cert", "CLIENT__CERT", "client.cert"),
                                            ("tls_client_key", "CLIENT__KEY", "client.key"))}
        if not files["tls_ca_file"][1] or not files["tls_client_cert"][1]:
            raise BenchError(f"--cluster {self.spec}: a tls:// scheduler needs this driver's certificate: add "
                             f"cluster: {{tls_ca_file, tls_client_cert, tls_client_key}} to {shown_path(params)}, or set "
                             f"{TLS_ENV}CA_FILE, {TLS_ENV}CLIENT__CERT and {TLS_ENV}CLIENT__KEY; nothing was run")
        for key, (where, path) in files.items():
            if path and "\n" not in path:  # Dask's config may also hold the PEM text itself
                try:
                    Path(path).read_bytes()
                except OSError as exc:
                    error = ParamsError if where.startswith("cluster.") else BenchError
                    raise error(f"{shown_path(params) if error is ParamsError else 'environment'}: {where}: cannot "
                                f"read {path} ({os_reason(exc)}); name a PEM file this user can read") from None
        return Security(require_encryption=True, **{key: path for key, (_, path) in files.items() if path})

    def _lease_host(self) -> str:
        """Return the address workers reach this driver at: the one it uses to reach the scheduler."""
        host = host_of(self.address)
        if self.loopback or is_loopback(host):
            return "127.0.0.1"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # connect() on UDP sends nothing
            probe.connect((host, 9))
            return probe.getsockname()[0]


def plain_tcp_warning(address: str) -> str:
    """Return the one line a sweep prints before using a plain-TCP scheduler: who could read what."""
    return (f"warning: the Dask scheduler at {address} is plain TCP: anyone who can reach it can run code on its "
            f"workers, and so read the sweep's lease token, the provider keys in the workers' environment and "
            f"every record in the run folder; use a tls:// scheduler (docs/cluster.md)")


def _quiet_dask() -> None:
    """Silence distributed's own logs in the driver (a lost scheduler: the sweep says so in one line)."""
    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] in ("distributed", "tornado", "bokeh"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def _reason(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
