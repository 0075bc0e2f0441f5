"""Can this worker run the sweep? Its bench, its view of the run and project folders, its way to the lease server.

Run on every worker before any model call and again by each task (workers may join later); a problem is one
line naming what is wrong and what to do."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.store import os_reason
from bench.models.ratelimit import TOKEN_ENV
from bench.sweep.cluster.worker_secrets import kernel_secrets

TOKEN_FILE = ".cluster-token"  # written by the driver in the run folder; each worker must read the same token


@dataclass(frozen=True)
class Expected:
    """What every worker must match: the driver's bench, its folders, its lease server (plain data, pickled)."""

    version: str
    digest: str
    run_dir: str
    token: str  # the content of <run_dir>/.cluster-token
    files: tuple[str, ...]  # what the kernels read from the project: the stage notebooks, the params file
    lease: str = ""  # tcp:<host>:<port> of the driver's lease server
    secrets: str = ""  # the worker plugin's name (bench.sweep.cluster.worker_secrets), never the token itself


def version() -> str:
    """Return the installed bench's version (what `pip install` recorded)."""
    try:
        return importlib.metadata.version("bench")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


@functools.cache
def source_digest() -> str:
    """Return a sha256 over bench's own source files (two installs with one digest run the same code)."""
    root = Path(__file__).resolve().parents[2]  # bench/sweep/cluster/probe.py → bench/
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def check_worker(expected: Expected, dask_worker: Any = None) -> dict[str, str]:
    """Return this worker's host, bench version and digest, and ``problem``: "" or what keeps it from the sweep.
    ``dask_worker``: the worker, which ``client.run`` passes by that name (within a task it is found alone)."""
    out = {"hostname": socket.gethostname(), "version": version(), "digest": source_digest(), "problem": ""}
    for check in (_same_bench, _run_folder, _project_files, functools.partial(_lease_server, worker=dask_worker)):
        if problem := check(expected):
            out["problem"] = problem
            break
    return out


def _same_bench(expected: Expected) -> str:
    if (version(), source_digest()) == (expected.version, expected.digest):
        return ""
    return (f"runs bench {version()} (source {source_digest()}), the driver {expected.version} (source "
            f"{expected.digest}); install the same bench on every worker")


def _run_folder(expected: Expected) -> str:
    path = Path(expected.run_dir) / TOKEN_FILE
    try:
        seen = path.read_text()
    except OSError as exc:
        return f"cannot read {path} ({os_reason(exc)}): mount the run folder at the same path on every worker"
    if seen != expected.token:
        return f"sees another folder at {expected.run_dir} (its {TOKEN_FILE} differs from the driver's)"
    scratch = Path(expected.run_dir) / f".probe-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        scratch.write_bytes(b"")
        scratch.unlink()
    except OSError as exc:
        return f"cannot write in {expected.run_dir} ({os_reason(exc)})"
    return ""


def _project_files(expected: Expected) -> str:
    for name in expected.files:
        if not os.access(name, os.R_OK):
            return f"cannot read {name}: the project folder must be at the same path on every worker"
    return ""


def _lease_server(expected: Expected, worker: Any = None) -> str:
    """Connect to the driver's lease server, show the token, and ask for a pong (5 s budget)."""
    if not expected.lease:
        return ""
    host, _, port = expected.lease.removeprefix("tcp:").rpartition(":")
    token = kernel_secrets(expected.secrets, worker).get(TOKEN_ENV, "")
    if not token:
        return (f"holds no token for the driver's lease server (the sweep's worker plugin {expected.secrets} did not "
                f"reach it); restart this worker, it gets the plugin when it joins")
    try:
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            hello = {"op": "hello", "token": token}
            conn.sendall((json.dumps(hello) + "\n" + json.dumps({"op": "ping", "id": 0}) + "\n").encode())
            if b"pong" not in conn.makefile("rb").readline():
                raise OSError("no answer")
    except (OSError, ValueError) as exc:
        return (f"cannot reach the driver's lease server at {host}:{port} ({exc}): workers must be able to "
                f"connect to the machine running `bench sweep` (docs/cluster.md)")
    return ""
