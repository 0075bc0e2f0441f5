"""A run folder's own MLflow store (``mlflow.db``), made so that a kill at any moment leaves a usable one.

MLflow's migrations are not one transaction, so the store is made in a temporary file and hard-linked into
place once done; a half-made store of an older bench is set aside and made anew."""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from pathlib import Path

from bench.core.processes import pid_alive

DB = "mlflow.db"
_TMP = ".mlflow.db."  # + <pid>.<token>.tmp: a store being made (its -journal beside it)
_SQLITE_SIDES = ("", "-journal", "-wal", "-shm")  # a database's own file and the files sqlite keeps beside it


def ensure_store(run_dir: Path) -> str | None:
    """Make ``run_dir``'s store if it has none (or only a half-made one, set aside first); return a line saying
    what was set aside, else None. Call it with mlflow imported (``mlflow_store._import_mlflow``)."""
    db = run_dir / DB
    said = None
    _remove_stale_temporaries(run_dir)
    if db.exists():
        if not _half_made(db):
            return None
        said = _set_aside(db)
    tmp = run_dir / f"{_TMP}{os.getpid()}.{secrets.token_hex(4)}.tmp"
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore  # noqa: PLC0415 (imported with mlflow)

    try:
        SqlAlchemyStore(f"sqlite:///{tmp}", (run_dir / "mlartifacts").as_uri()).engine.dispose()
        try:
            os.link(tmp, db)  # published whole; another process's store, published first, wins
        except FileExistsError:
            pass
        except OSError:  # a filesystem without hard links
            if not db.exists():
                os.replace(tmp, db)
    finally:
        for side in _SQLITE_SIDES:
            Path(f"{tmp}{side}").unlink(missing_ok=True)
    return said


def _half_made(db: Path) -> bool:
    """Return whether ``db`` is a store whose making was cut short: no schema version, or one short of MLflow's
    head, with no run in it (an older MLflow's store holding runs is left for MLflow to speak of)."""
    try:
        from mlflow.store.db.utils import _get_latest_schema_revision  # noqa: PLC0415 (the head MLflow verifies)

        head = _get_latest_schema_revision()
    except Exception:  # MLflow's own check stays the judge
        return False
    try:
        with sqlite3.connect(db, timeout=30) as conn:  # a hot journal a kill left is rolled back on opening
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            version = (conn.execute("SELECT version_num FROM alembic_version").fetchall()
                       if "alembic_version" in tables else [])
            if version == [(head,)]:
                return False
            return "runs" not in tables or conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    except sqlite3.Error:  # not a database at all (a file cut at its first page): nothing in it to keep
        return True


def _set_aside(db: Path) -> str:
    """Rename a half-made store and the files sqlite kept beside it (a hot journal must not meet the new store)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = db.with_name(f"{DB}.half-made-{stamp}-{secrets.token_hex(2)}")
    for side in reversed(_SQLITE_SIDES):  # the journal first: a store is never left without its journal
        if Path(f"{db}{side}").exists():
            os.replace(f"{db}{side}", f"{aside}{side}")
    return (f"tracking: {db} was left half-made by a process stopped while MLflow created it; set aside as "
            f"{aside.name} and made anew (nothing had been logged to it)")


def _remove_stale_temporaries(run_dir: Path) -> None:
    """Remove the stores a killed process was making (its pid gone)."""
    for path in run_dir.glob(f"{_TMP}*.tmp*"):
        pid = path.name[len(_TMP):].split(".", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            path.unlink(missing_ok=True)
