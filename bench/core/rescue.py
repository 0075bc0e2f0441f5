"""Rescue files: records a run could not append (disk full, file size limit, quota) are saved, never dropped,
and moved back (``import_rescued``) when a run opens its folder; nothing is duplicated."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path

from bench.core.records import Record
from bench.core.secrets import redact
from bench.core.store import _KINDS, os_reason, write_all

RESCUE_GLOB = "*.rescue-*.jsonl"


def rescue_dirs(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Return the rescue folders outside ``run_dir`` for this run folder, in the order they are tried."""
    run_dir = Path(run_dir).resolve()
    name = f"{run_dir.name}-{hashlib.sha256(str(run_dir).encode()).hexdigest()[:10]}"  # one per run folder
    configured = os.environ.get("BENCH_CACHE_DIR")
    cache = Path(configured).expanduser() if configured else Path.home() / ".cache" / "bench"
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return [cache / "rescue" / name, Path(tempfile.gettempdir()) / f"bench-rescue-{uid}" / name]


def save(run_dir: str | os.PathLike[str],
         records: Iterable[Record]) -> tuple[list[tuple[int, Path]], list[Record], str]:
    """Save ``records`` to rescue files; return (records saved per file, records nowhere saved, why); never raises."""
    run_dir = Path(run_dir)
    by_stem: dict[str, list[tuple[Record, bytes]]] = {}
    for rec in records:
        by_stem.setdefault(_KINDS[rec.kind], []).append((rec, redact(rec.model_dump_json()).encode() + b"\n"))
    saved: list[tuple[int, Path]] = []
    left: list[Record] = []
    reason = ""
    for stem, rows in by_stem.items():
        for folder in (run_dir, *rescue_dirs(run_dir)):
            if not rows:
                break
            name = f"{stem}.rescue-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
            n, exc = _write_lines(folder, name, [line for _rec, line in rows])
            if n:
                saved.append((n, folder / name))
                rows = rows[n:]
            if exc is not None:
                reason = f"{folder}: {os_reason(exc)}"
        left += [rec for rec, _line in rows]
    return saved, left, reason


def _write_lines(folder: Path, name: str, lines: list[bytes]) -> tuple[int, OSError | None]:
    """Write as many whole ``lines`` as fit to ``folder/name`` (temp name, fsync, rename); return (lines, error)."""
    data = b"".join(lines)
    tmp = folder / f".{name}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        return 0, exc
    keep = 0
    try:
        done, exc = write_all(fd, data)
        keep = len(data) if exc is None else data.rfind(b"\n", 0, done) + 1
        if keep < done:
            os.ftruncate(fd, keep)
        if keep:
            os.fsync(fd)
    except OSError as err:  # cannot cut or make durable: this location took nothing
        keep, exc = 0, err
    finally:
        os.close(fd)
    try:
        if keep:
            os.rename(tmp, folder / name)
        else:
            tmp.unlink(missing_ok=True)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        return 0, err
    return data[:keep].count(b"\n"), exc


def import_rescued(run_dir: str | os.PathLike[str]) -> int:
    """Move rescue files saved outside ``run_dir`` into it; return how many records moved (the rest wait, warned)."""
    run_dir = Path(run_dir)
    moved = 0
    for folder in rescue_dirs(run_dir):
        if not folder.is_dir():
            continue
        for src in sorted(folder.glob(RESCUE_GLOB)):
            try:
                moved += _move(src, run_dir)
            except OSError as exc:
                warnings.warn(f"cannot move the rescued records {src} into {run_dir} yet ({os_reason(exc)}); "
                              f"they are kept there and moved by the next run", RuntimeWarning, stacklevel=2)
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if empty
    if moved:
        print(f"moved {moved} rescued records into {run_dir}", flush=True)
    return moved


def _move(src: Path, run_dir: Path) -> int:
    dest = run_dir / src.name
    if dest.exists():  # an earlier import published it and stopped before removing the source
        src.unlink(missing_ok=True)
        return 0
    data = src.read_bytes()
    data = data[:data.rfind(b"\n") + 1]  # a rescue file is complete, but never import a torn line
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / f".{src.name}.importing-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        _done, exc = write_all(fd, data)
        if exc is None:
            os.fsync(fd)
    finally:
        os.close(fd)
    try:
        if exc is not None:
            raise exc
        try:
            os.link(tmp, dest)  # fails if another run published it meanwhile: never two copies
            count = data.count(b"\n")
        except FileExistsError:
            count = 0
        except OSError:  # a file system without hard links: rename (not exclusive, but dest was free)
            os.rename(tmp, dest)
            count = data.count(b"\n")
    finally:
        tmp.unlink(missing_ok=True)
    src.unlink(missing_ok=True)
    return count
