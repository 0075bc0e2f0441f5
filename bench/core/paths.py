"""Where things are: the project root, the run folders and the shared response cache (paths resolve against the
project root, so `params/demo.yaml` works from JupyterLab and papermill alike)."""

from __future__ import annotations

import os
from pathlib import Path


def project_root(start: Path | None = None) -> Path:
    """Return the nearest folder upward from ``start`` holding params/ and notebooks/, else bench's checkout or cwd."""
    here = (start or Path.cwd()).resolve()
    package_checkout = Path(__file__).resolve().parents[2]  # the checkout of an editable install
    for folder in (here, *here.parents, package_checkout):
        if (folder / "params").is_dir() and (folder / "notebooks").is_dir():
            return folder
    return here


def resolve(path: str | os.PathLike[str], root: Path | None = None) -> Path:
    """Return ``path`` made absolute: as given if it exists from the cwd, else under the project root."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p.resolve()
    return (root or project_root()) / p


def runs_root(root: Path | None = None) -> Path:
    """Return the folder holding every sweep's run folder (``$BENCH_RUNS`` or ``<project>/runs``)."""
    env = os.environ.get("BENCH_RUNS")
    return Path(env).resolve() if env else (root or project_root()) / "runs"


def run_dir(sweep_name: str, root: Path | None = None) -> Path:
    """Return ``runs/<sweep name>``, where a sweep's records, notebooks and cache entries live."""
    return runs_root(root) / sweep_name


def reports_root(root: Path | None = None) -> Path:
    """Return the folder holding every sweep's HTML report (``$BENCH_REPORTS`` or ``<project>/reports``)."""
    env = os.environ.get("BENCH_REPORTS")
    return Path(env).resolve() if env else (root or project_root()) / "reports"


CACHE_ENV = "BENCH_CACHE"  # the response cache's folder (bench.models.cache)
BACKEND_ENV = "BENCH_BACKEND_STORE_URI"  # `bench tracking-server`'s backend URI, when a password must stay off
# bench's own command line (bench.tracking.server)


def cache_path(root: Path | None = None, runs: Path | None = None) -> Path:
    """Return the response cache folder shared by all sweeps: ``$BENCH_CACHE``, else ``<runs>/.cache/responses``
    (``runs``: the folder holding the run folders, else the project's)."""
    env = os.environ.get(CACHE_ENV, "")
    return Path(env).expanduser().absolute() if env else (runs or runs_root(root)) / ".cache" / "responses"
