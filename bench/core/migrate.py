"""Re-keying a run folder written before record ids included the endpoint (schema 1 → 2), once, keeping the
originals in ``.schema1-backup/``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.core.secrets import redact
from bench.core.records import SCHEMA_VERSION, Candidate, Judgment, Record, Review
from bench.core.store import RunStore, atomic_write

BACKUP = ".schema1-backup"
_OLD = b'{"schema_version":1,'


def migrate_run(run_dir: Path, models: dict[str, Any], judges: dict[str, Any]) -> int:
    """Rewrite the schema-1 records of ``run_dir`` with schema-2 ids; return how many ids changed."""
    store = RunStore(run_dir)
    files = {kind: store.files(kind) for kind in ("candidate", "judgment", "review")}
    if not any(_OLD in p.read_bytes() for paths in files.values() for p in paths):
        return 0
    renamed: dict[str, str] = {}

    def candidate(rec: Candidate) -> Record:
        entry = models.get(rec.model_id)
        endpoint = entry.endpoint if entry is not None and entry.model == rec.model else None
        return _rekey(rec, {"endpoint": endpoint} if endpoint else {}, renamed)

    def judgment(rec: Judgment) -> Record:
        entry = judges.get(rec.judge_id)
        update: dict[str, Any] = {"candidate_ids": [renamed.get(c, c) for c in rec.candidate_ids]}
        if entry is not None and entry.model == rec.judge_model and entry.endpoint:
            update["judge_endpoint"] = entry.endpoint
        return _rekey(rec, update, renamed)

    def review(rec: Review) -> Record:
        return _rekey(rec, {"judgment_id": renamed.get(rec.judgment_id, rec.judgment_id),
                            "candidate_ids": [renamed.get(c, c) for c in rec.candidate_ids]}, renamed)

    for kind, convert in (("candidate", candidate), ("judgment", judgment), ("review", review)):
        for path in files[kind]:
            _rewrite(path, convert, run_dir / BACKUP)
    return len(renamed)


def _rekey(rec: Record, update: dict[str, Any], renamed: dict[str, str]) -> Record:
    """Return ``rec`` as a schema-2 record with ``update`` applied and its id recomputed from content."""
    if rec.schema_version >= SCHEMA_VERSION:
        return rec
    data = {**rec.model_dump(exclude={"id", "schema_version"}), **update}
    new = type(rec).model_validate(data)
    if new.id != rec.id:
        renamed[rec.id] = new.id
    return new


def _rewrite(path: Path, convert: Any, backup: Path) -> None:
    """Rewrite one record file through ``convert``, keeping unreadable lines as they are."""
    data = path.read_bytes()
    if _OLD not in data:
        return
    cls = {"candidates": Candidate, "judgments": Judgment, "reviews": Review}[path.name.split(".")[0]]
    out = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            out.append(convert(cls.model_validate_json(line)).model_dump_json().encode())
        except ValidationError:
            out.append(line)  # a torn line stays for the readers to skip, as before
    backup.mkdir(exist_ok=True)
    if not (backup / path.name).exists():
        shutil.copy2(path, backup / path.name)
    atomic_write(path, redact(b"\n".join(out).decode("utf-8", "surrogatepass")).encode("utf-8", "surrogatepass")
                 + b"\n")
