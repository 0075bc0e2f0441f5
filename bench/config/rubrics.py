"""Rubric files (`rubrics/<id>.md`): YAML front matter (`RubricSpec`), then the instruction the judge reads.
The whole file's text is hashed into ``Rubric.hash``: an edit without a version bump is a different rubric."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.config import reply_schemas, scoring
from bench.config._errors import format_errors
from bench.config._yaml import parse_yaml
from bench.config.rubric_spec import Criterion, RubricSpec
from bench.core.errors import ParamsError
from bench.core.records import Scenario, canonical_json, content_hash
from bench.core.reviewed import scale_of
from bench.core.store import atomic_write

class Rubric(RubricSpec):
    """A loaded rubric: the validated front matter plus the body, the file's hash and its path."""

    body: str
    hash: str
    path: Path

    def criterion(self, criterion_id: str) -> Criterion:
        """Return the criterion with this id (KeyError naming the rubric's criteria if none)."""
        for c in self.criteria:
            if c.id == criterion_id:
                return c
        raise KeyError(f"rubric {self.key} has no criterion '{criterion_id}' "
                       f"(criteria: {', '.join(c.id for c in self.criteria) or 'none'})")

    def scale_of(self, criterion_id: str) -> tuple[int, int]:
        """Return the ``(lo, hi)`` scale of a criterion (KeyError if the rubric has no such criterion)."""
        return self.criterion(criterion_id).scale

    # -- scoring (bench.config.scoring) ------------------------------------------------------------------
    @property
    def shared_scale(self) -> bool:
        """True when every criterion uses the same scale (then `composite` stays on that scale)."""
        return scoring.shared_scale(self)

    @property
    def composite_scale(self) -> tuple[int, int]:
        """Return the scale `composite` reports on: the criteria's common scale, or (0, 1) if they differ."""
        return scoring.composite_scale(self)

    def composite(self, scores: dict[str, float]) -> float:
        """Return the weighted mean of the criterion scores, on `composite_scale` (see bench.config.scoring)."""
        return scoring.composite(self, scores)

    def normalized(self, scores: dict[str, float]) -> float:
        """Return the weighted mean of the criterion scores, each mapped to 0–1 on its own scale."""
        return scoring.normalized(self, scores)

    def hybrid_score(self, scores: dict[str, float], automated: float) -> float:
        """Return a hybrid 0–1 score: ``weights.llm`` × `normalized` + ``weights.automated`` × ``automated``."""
        return scoring.hybrid_score(self, scores, automated)

    # -- structured output (bench.config.reply_schemas) --------------------------------------------------
    def item_schema(self) -> dict[str, Any]:
        """Return the JSON schema of one grade: ``{"scores": {<criterion>: int}, "rationale": str}``."""
        return reply_schemas.item_schema(self)

    def packed_schema(self, ids: list[str]) -> dict[str, Any]:
        """Return the JSON schema of the grades of the items ``ids`` packed in one call."""
        return reply_schemas.packed_schema(self, ids)

    def requirement_schema(self) -> dict[str, Any]:
        """Return the JSON schema of one checklist answer: ``{"fulfilled": bool, "feedback": str}``."""
        return reply_schemas.requirement_schema()

    def pairwise_schema(self) -> dict[str, Any]:
        """Return the JSON schema of a pairwise verdict: ``{"verdict": <label>, "rationale": str}``."""
        return reply_schemas.pairwise_schema(self)


# -- loading --------------------------------------------------------------------------------------------
def snapshot_rubric(rubric: Rubric, run_dir: Path | str) -> Path:
    """Copy a rubric file into ``run_dir/rubrics/<hash>/<id>.md`` (once; its content never changes)."""
    target = Path(run_dir) / "rubrics" / rubric.hash / f"{rubric.id}.md"
    if not target.exists():
        atomic_write(target, rubric.path.read_bytes())
    return target


def run_rubric(run_dir: Path | str, rubric_id: str, rubric_hash: str, root: Path | str | None = None) -> Rubric:
    """Return the rubric a run's judgments were graded with: its snapshot in the run folder, else the
    project's ``rubrics/<id>.md`` if its hash still matches; raise ParamsError when neither is there."""
    snap = Path(run_dir) / "rubrics" / rubric_hash / f"{rubric_id}.md"
    if snap.is_file():
        return parse_rubric(snap.read_text(encoding="utf-8-sig"), snap)
    if root is not None and (Path(root) / "rubrics" / f"{rubric_id}.md").is_file():
        rubric = load_rubric(rubric_id, root)
        if rubric.hash == rubric_hash:
            return rubric
    raise ParamsError(f"{run_dir}: rubric {rubric_id} (hash {rubric_hash}) is neither in the run folder's rubrics/ "
                      f"nor unchanged in the project; re-run `bench sweep` (it snapshots the rubrics it uses)")


def run_scales(run_dir: Path | str, judgments: Iterable[Any], root: Path | str | None = None
               ) -> dict[str, dict[str, tuple[float, float]]]:
    """Return per rubric hash of ``judgments`` the scales its judgments and reviews must lie on; a rubric found
    nowhere gets none (its values are only checked for being finite)."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for j in {j.rubric_hash: j for j in judgments}.values():
        try:
            out[j.rubric_hash] = scale_of(run_rubric(run_dir, j.rubric_id, j.rubric_hash, root))
        except ParamsError:
            continue
    return out


def check_reference_keys(rubric: Rubric, scenarios: list[Scenario], source: str) -> None:
    """Raise ParamsError naming the rubric file, the key and ``source`` when ``rubric`` names a reference key some
    scenario lacks: a judge must never be shown a reference that is not there."""
    if not rubric.reference:
        return
    have = [set(s.reference or {}) for s in scenarios]
    common = set.intersection(*have) if have else set()
    missing = [k for k in rubric.reference if k not in common]
    if missing:
        keys = ", ".join(sorted(common)) or "none"
        raise ParamsError(f"{rubric.path}: reference: names {', '.join(missing)}, which the scenarios lack: {source} "
                          f"gives every scenario the reference keys: {keys}; add it there or remove it from the rubric")


def available_rubrics(root: Path | str) -> list[str]:
    """Return the ids of the rubric files in ``root/rubrics/`` (sorted; empty if the folder is missing)."""
    folder = Path(root) / "rubrics"
    return sorted(p.stem for p in folder.glob("*.md") if p.is_file()) if folder.is_dir() else []


def load_rubric(ref: str, root: Path | str, base: Path | str | None = None) -> Rubric:
    """Return the validated Rubric named by ``ref``: a rubric id (``root/rubrics/<id>.md``) or a path, absolute
    or relative to ``base`` and then ``root``. ParamsError naming the file and key, or the ids available."""
    path = _resolve(str(ref), Path(root), Path(base) if base is not None else None)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParamsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ParamsError(f"{path}: cannot read the rubric file ({exc.strerror or exc})") from None
    return parse_rubric(text, path)


def parse_rubric(text: str, path: Path | str) -> Rubric:
    """Return the Rubric of a rubric file's ``text``; ``path`` names it in errors (its stem must be the id)."""
    path = Path(path)
    front, body, offset = _split(text, path)
    data = parse_yaml(path, front, "rubric file", first_line=offset, part=" in the front matter")
    if data is None:
        raise ParamsError(f"{path}: the front matter is empty; expected the keys {', '.join(_front_keys())}")
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: the front matter must be a mapping of keys ({', '.join(_front_keys())}), "
                          f"got {type(data).__name__}")
    try:
        spec = RubricSpec.model_validate(data, context={"base": path.parent})  # schema files: beside the rubric
    except ValidationError as exc:
        raise ParamsError(format_errors(path, exc, RubricSpec, tag_noun="check")) from None
    if spec.id != path.stem:
        raise ParamsError(f"{path}: id: must equal the file name '{path.stem}' (got '{spec.id}'); "
                          f"rename the file or fix the id")
    if spec.mode != "automated" and not body.strip():
        raise ParamsError(f"{path}: the body is empty; write the judge's instruction after the closing '---'")
    read = [c.json_schema for c in spec.checks if getattr(c, "schema_file", None)]  # their content is the rubric's
    return Rubric(**dict(spec), body=body, hash=content_hash(text + (canonical_json(read) if read else "")),
                  path=path.resolve())


def _resolve(ref: str, root: Path, base: Path | None) -> Path:
    looks_like_path = "/" in ref or "\\" in ref or ref.endswith(".md")
    if looks_like_path:
        p = Path(ref).expanduser()
        candidates = [p] if p.is_absolute() else [*([base / p] if base is not None else []), root / p]
    else:
        candidates = [root / "rubrics" / f"{ref}.md"]
    for c in candidates:
        if c.is_file():
            return c
    ids = available_rubrics(root)
    where = " or ".join(str(c) for c in candidates)
    have = f"available rubric ids in {root / 'rubrics'}: {', '.join(ids)}" if ids else \
        f"there are no rubric files in {root / 'rubrics'}"
    raise ParamsError(f"rubric '{ref}' not found (looked for {where}); {have}")


def _split(text: str, path: Path) -> tuple[str, str, int]:
    """Return (front matter, body, line number of the front matter's first line) of a rubric file."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ParamsError(f"{path}:1: a rubric file starts with a line '---', then YAML front matter "
                          f"(id, version, mode, …), a closing '---' and the judge's instruction")
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n").rstrip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1:]), 2
    raise ParamsError(f"{path}: the front matter has no closing '---' line")


def _front_keys() -> list[str]:
    return list(RubricSpec.model_fields)
