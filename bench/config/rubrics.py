"""Rubric files (`rubrics/<id>.md`): a judge's instruction, its scales and its checks, versioned and hashed.

A rubric file is YAML front matter between a first line ``---`` and the next ``---``,
then a markdown body: the instruction the judge reads. The front matter says how the
judge grades (``mode``) and with what: anchored ``criteria`` (rubric, hybrid),
``requirements`` (checklist), verdict ``labels`` (pairwise), automated ``checks``
(automated, hybrid) and the hybrid ``weights``. Every mistake is a ParamsError naming
the rubric file and the key path. The whole file's text is hashed into ``Rubric.hash``,
so an edit without a version bump is still recognised as a different rubric.

The JSON schemas here are meant for OpenAI-style ``response_format`` (see
`response_format`): every object is closed (``additionalProperties: false``) with all
properties required, and integer scales are spelled as ``enum`` (llama.cpp's grammar
enforces enum but not minimum/maximum).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from bench.config.checks import CHECK_MODELS, KINDS, Check
from bench.core.errors import ParamsError
from bench.config.params import DuplicateKeyError, UniqueKeyLoader, format_errors, model_of
from bench.core.records import content_hash

RubricMode = Literal["rubric", "checklist", "pairwise", "automated", "hybrid"]
MODES: tuple[str, ...] = ("rubric", "checklist", "pairwise", "automated", "hybrid")
DEFAULT_LABELS: tuple[str, ...] = ("A>>B", "A>B", "A=B", "B>A", "B>>A")

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")
_ID_HELP = "must be a short id of letters, digits, '.', '_' or '-'"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _slug(v: str) -> str:
    if not _ID.match(v):
        raise ValueError(_ID_HELP)
    return v


class Criterion(_Strict):
    """One graded dimension: an integer scale ``[lo, hi]`` with an anchor text for every level."""

    id: str
    description: str
    scale: tuple[int, int]
    anchors: dict[int, str]
    weight: float = Field(default=1.0, ge=0)

    @field_validator("id")
    @classmethod
    def _slug_id(cls, v: str) -> str:
        return _slug(v)

    @field_validator("anchors", mode="before")
    @classmethod
    def _anchor_texts(cls, v: Any) -> Any:
        if isinstance(v, dict):
            odd = [k for k, text in v.items() if not isinstance(text, str)]
            if odd:
                raise ValueError(f"anchor(s) {', '.join(map(str, odd))}: the text must be a string; quote it "
                                 f"(YAML reads yes/no/on/off as booleans and digits as numbers)")
        return v

    @model_validator(mode="after")
    def _anchored(self) -> "Criterion":
        lo, hi = self.scale
        if lo >= hi:
            raise ValueError(f"criterion '{self.id}': scale must be [lo, hi] with lo < hi (got [{lo}, {hi}])")
        levels = set(range(lo, hi + 1))
        missing, extra = sorted(levels - set(self.anchors)), sorted(set(self.anchors) - levels)
        if missing or extra:
            parts = ([f"missing level(s) {', '.join(map(str, missing))}"] if missing else []) + \
                    ([f"extra level(s) {', '.join(map(str, extra))}"] if extra else [])
            raise ValueError(f"criterion '{self.id}': anchors must cover every level of the scale [{lo}, {hi}] "
                             f"exactly: {'; '.join(parts)}")
        empty = [k for k, text in sorted(self.anchors.items()) if not str(text).strip()]
        if empty:
            raise ValueError(f"criterion '{self.id}': anchor(s) {', '.join(map(str, empty))} have no text")
        return self

    @property
    def levels(self) -> list[int]:
        """Return every integer of the scale, low to high."""
        return list(range(self.scale[0], self.scale[1] + 1))


class Requirement(_Strict):
    """One yes/no requirement of a checklist rubric (each is asked of the judge separately)."""

    id: str
    text: str

    @field_validator("id")
    @classmethod
    def _slug_id(cls, v: str) -> str:
        return _slug(v)


class HybridWeights(_Strict):
    """How a hybrid rubric mixes its LLM part and its automated part; normalized to sum to 1 on load."""

    llm: float = Field(ge=0)
    automated: float = Field(ge=0)

    @model_validator(mode="after")
    def _normalize(self) -> "HybridWeights":
        total = self.llm + self.automated
        if total <= 0:
            raise ValueError("llm + automated must be greater than 0")
        object.__setattr__(self, "llm", self.llm / total)
        object.__setattr__(self, "automated", self.automated / total)
        return self


def _version(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return str(v)  # version: 1 means "1"
    if isinstance(v, float):
        raise ValueError(f"write the version in quotes (version: \"{v}\"): YAML read it as the number {v}")
    return v


class RubricSpec(_Strict):
    """The front matter of a rubric file (these are exactly the keys a rubric file may use)."""

    id: str
    version: str
    mode: RubricMode
    criteria: list[Criterion] = Field(default_factory=list, validate_default=True)
    requirements: list[Requirement] = Field(default_factory=list, validate_default=True)
    labels: list[str] = Field(default_factory=lambda: list(DEFAULT_LABELS), validate_default=True)
    checks: list[Check] = Field(default_factory=list, validate_default=True)
    weights: HybridWeights | None = Field(default=None, validate_default=True)
    max_chars: int = Field(default=20000, gt=0)  # candidate text a judge sees; the judge truncates with a note

    @field_validator("id")
    @classmethod
    def _slug_id(cls, v: str) -> str:
        return _slug(v)

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, v: Any) -> Any:
        return _version(v)

    @field_validator("version")
    @classmethod
    def _version_text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("cannot be empty")
        return v

    @field_validator("criteria")
    @classmethod
    def _criteria(cls, v: list[Criterion], info: ValidationInfo) -> list[Criterion]:
        mode = info.data.get("mode")
        if mode in ("rubric", "hybrid") and not v:
            raise ValueError(f"mode '{mode}' needs at least 1 criterion (id, description, scale, anchors)")
        _unique("criterion id", [c.id for c in v])
        if v and sum(c.weight for c in v) <= 0:
            raise ValueError("the criteria's weights sum to 0; give at least one a positive weight")
        return v

    @field_validator("requirements")
    @classmethod
    def _requirements(cls, v: list[Requirement], info: ValidationInfo) -> list[Requirement]:
        mode = info.data.get("mode")
        if mode == "checklist" and not v:
            raise ValueError("mode 'checklist' needs at least 1 requirement (id, text)")
        _unique("requirement id", [r.id for r in v])
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: list[str]) -> list[str]:
        if len(v) < 2:
            raise ValueError("needs at least 2 labels")
        if any(not s.strip() for s in v):
            raise ValueError("labels cannot be empty")
        _unique("label", v)
        return v

    @field_validator("checks")
    @classmethod
    def _checks(cls, v: list[Any], info: ValidationInfo) -> list[Any]:
        mode = info.data.get("mode")
        if mode in ("automated", "hybrid") and not v:
            raise ValueError(f"mode '{mode}' needs at least 1 check (id, kind: {' | '.join(KINDS)})")
        _unique("check id", [c.id for c in v])
        if v and sum(c.weight for c in v) <= 0:
            raise ValueError("the checks' weights sum to 0; give at least one a positive weight")
        return v

    @field_validator("weights")
    @classmethod
    def _weights(cls, v: HybridWeights | None, info: ValidationInfo) -> HybridWeights | None:
        if v is None and info.data.get("mode") == "hybrid":
            return HybridWeights(llm=1.0, automated=1.0)  # omitted: an even mix
        return v


def _unique(what: str, keys: list[str]) -> None:
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"duplicate {what} {', '.join(dupes)}")


class Rubric(RubricSpec):
    """A loaded rubric: the validated front matter plus the body, the file's hash and its path."""

    body: str
    hash: str
    path: Path

    @property
    def key(self) -> str:
        """Return ``id@version``, the rubric's name in judgments and reports."""
        return f"{self.id}@{self.version}"

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

    @property
    def shared_scale(self) -> bool:
        """True when every criterion uses the same scale (then `composite` stays on that scale)."""
        return len({c.scale for c in self.criteria}) <= 1

    @property
    def composite_scale(self) -> tuple[int, int]:
        """Return the scale `composite` reports on: the criteria's common scale, or (0, 1) if they differ."""
        if self.criteria and self.shared_scale:
            return self.criteria[0].scale
        return (0, 1)

    def composite(self, scores: dict[str, float]) -> float:
        """Return the weighted mean of the criterion scores.

        When all criteria share one scale the result is on that scale (e.g. 1–5); when scales
        differ each score is first mapped to 0–1 on its own scale and the result is on 0–1
        (see `composite_scale`). Scores of unknown criteria are refused, as are missing ones.
        """
        self._check_scores(scores)
        total = sum(c.weight for c in self.criteria)
        if self.shared_scale:
            return sum(c.weight * float(scores[c.id]) for c in self.criteria) / total
        return sum(c.weight * self._unit(c, scores[c.id]) for c in self.criteria) / total

    def normalized(self, scores: dict[str, float]) -> float:
        """Return the weighted mean of the criterion scores, each mapped to 0–1 on its own scale."""
        self._check_scores(scores)
        total = sum(c.weight for c in self.criteria)
        return sum(c.weight * self._unit(c, scores[c.id]) for c in self.criteria) / total

    def hybrid_score(self, scores: dict[str, float], automated: float) -> float:
        """Return a hybrid 0–1 score: ``weights.llm`` × `normalized` + ``weights.automated`` × ``automated``."""
        w = self.weights or HybridWeights(llm=1.0, automated=1.0)
        return w.llm * self.normalized(scores) + w.automated * float(automated)

    @staticmethod
    def _unit(c: Criterion, score: float) -> float:
        lo, hi = c.scale
        return (float(score) - lo) / (hi - lo)

    def _check_scores(self, scores: dict[str, float]) -> None:
        if not self.criteria:
            raise ValueError(f"rubric {self.key} (mode {self.mode}) has no criteria to score")
        ids = [c.id for c in self.criteria]
        missing = [i for i in ids if i not in scores]
        unknown = sorted(set(scores) - set(ids))
        if missing or unknown:
            raise ValueError(f"rubric {self.key}: scores must name exactly the criteria {', '.join(ids)}"
                             + (f"; missing {', '.join(missing)}" if missing else "")
                             + (f"; unknown {', '.join(unknown)}" if unknown else ""))

    # -- structured output ------------------------------------------------------------------------------
    def _scores_schema(self) -> dict[str, Any]:
        if not self.criteria:
            raise ValueError(f"rubric {self.key} (mode {self.mode}) has no criteria, so no score schema")
        return _object({c.id: {"type": "integer", "enum": c.levels, "description": c.description}
                        for c in self.criteria})

    def item_schema(self) -> dict[str, Any]:
        """Return the JSON schema of one grade: ``{"scores": {<criterion>: int}, "rationale": str}``."""
        return _object({"scores": self._scores_schema(), "rationale": {"type": "string"}})

    def batch_schema(self, ids: list[str]) -> dict[str, Any]:
        """Return the JSON schema of a batch of grades: ``{"grades": [{"id", "scores", "rationale"}, …]}``.

        ``id`` must be one of ``ids`` (the items shown); the top level is an object, as OpenAI requires.
        """
        ids = list(dict.fromkeys(str(i) for i in ids))
        if not ids:
            raise ValueError("batch_schema needs at least 1 item id")
        grade = _object({"id": {"type": "string", "enum": ids}, "scores": self._scores_schema(),
                         "rationale": {"type": "string"}})
        return _object({"grades": {"type": "array", "items": grade}})

    def requirement_schema(self) -> dict[str, Any]:
        """Return the JSON schema of one checklist answer: ``{"fulfilled": bool, "feedback": str}``."""
        return _object({"fulfilled": {"type": "boolean"}, "feedback": {"type": "string"}})

    def pairwise_schema(self) -> dict[str, Any]:
        """Return the JSON schema of a pairwise verdict: ``{"verdict": <label>, "rationale": str}``."""
        return _object({"verdict": {"type": "string", "enum": list(self.labels)}, "rationale": {"type": "string"}})

    # -- prompt text ------------------------------------------------------------------------------------
    def anchors_text(self) -> str:
        """Return the criteria with their anchored scales as markdown (empty if the rubric has none)."""
        blocks = []
        for c in self.criteria:
            lo, hi = c.scale
            weight = "" if self.shared_weights else f", weight {c.weight:g}"
            lines = [f"### {c.id} ({lo}–{hi}{weight})", "", c.description.strip(), ""]
            for level in sorted(c.anchors, reverse=True):
                text = " ".join(line.strip() for line in c.anchors[level].strip().splitlines())
                lines.append(f"- **{level}**: {text}")
            blocks.append("\n".join(lines))
        if not blocks:
            return ""
        return "## Criteria\n\n" + "\n\n".join(blocks)

    @property
    def shared_weights(self) -> bool:
        """True when every criterion has the same weight (then weights are not shown to the judge)."""
        return len({c.weight for c in self.criteria}) <= 1


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    """Return a closed JSON-schema object with every property required."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def response_format(schema: dict[str, Any], name: str = "judgment") -> dict[str, Any]:
    """Return an OpenAI ``response_format`` (strict json_schema) wrapping one of the schemas above."""
    return {"type": "json_schema",
            "json_schema": {"name": _SCHEMA_NAME.sub("_", name)[:64] or "judgment", "schema": schema, "strict": True}}


# -- loading --------------------------------------------------------------------------------------------
def snapshot_rubric(rubric: Rubric, run_dir: Path | str) -> Path:
    """Copy a rubric file into ``run_dir/rubrics/<hash>/<id>.md`` (once; its content never changes)."""
    from bench.core.store import atomic_write  # noqa: PLC0415

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


def available_rubrics(root: Path | str) -> list[str]:
    """Return the ids of the rubric files in ``root/rubrics/`` (sorted; empty if the folder is missing)."""
    folder = Path(root) / "rubrics"
    return sorted(p.stem for p in folder.glob("*.md") if p.is_file()) if folder.is_dir() else []


def load_rubric(ref: str, root: Path | str, base: Path | str | None = None) -> Rubric:
    """Return the validated Rubric named by ``ref``.

    ``ref`` is a rubric id (→ ``root/rubrics/<id>.md``) or a path to a rubric file: absolute,
    or relative to ``base`` (e.g. the params file's folder) and then to ``root``. Raises
    ParamsError naming the file and key for an invalid rubric, and listing the available
    ids when no file is found.
    """
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
    data = _parse_yaml(front, path, offset)
    if data is None:
        raise ParamsError(f"{path}: the front matter is empty; expected the keys {', '.join(_front_keys())}")
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: the front matter must be a mapping of keys ({', '.join(_front_keys())}), "
                          f"got {type(data).__name__}")
    try:
        spec = RubricSpec.model_validate(data)
    except ValidationError as exc:
        raise ParamsError(_format(path, exc, data)) from None
    if spec.id != path.stem:
        raise ParamsError(f"{path}: id: must equal the file name '{path.stem}' (got '{spec.id}'); "
                          f"rename the file or fix the id")
    if spec.mode != "automated" and not body.strip():
        raise ParamsError(f"{path}: the body is empty; write the judge's instruction after the closing '---'")
    return Rubric(**dict(spec), body=body, hash=content_hash(text), path=path.resolve())


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


def _parse_yaml(front: str, path: Path, first_line: int) -> Any:
    try:
        return yaml.load(front, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except DuplicateKeyError as exc:  # its line is 1-based within the front matter
        raise ParamsError(f"{path}:{exc.line + first_line - 1}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + first_line}:{mark.column + 1}" if mark else ""
        raise ParamsError(f"{path}{where}: invalid YAML in the front matter "
                          f"({getattr(exc, 'problem', None) or exc})") from None


# -- error messages -------------------------------------------------------------------------------------
def _front_keys() -> list[str]:
    return list(RubricSpec.model_fields)


def _format(path: Path, exc: ValidationError, data: Any) -> str:
    """Return one line per error (``file: key.path: message``), via params.format_errors.

    Discriminator tags (``checks[0].regex.pattern``) are dropped from key paths, unknown keys
    list what is allowed at that place of a rubric, and a check without a valid kind says the kinds.
    """
    lines: list[str] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        clean = _strip_tags(loc)
        where = _loc_text(clean) or "(top level)"
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc[:-1])
            lines.append(f"{path}: {where}: unknown key '{loc[-1]}'"
                         + (f" (allowed: {', '.join(allowed)})" if allowed else ""))
            continue
        if err["type"] in ("union_tag_not_found", "union_tag_invalid"):
            got = err.get("ctx", {}).get("tag")
            what = f"unknown check kind '{got}'" if got else "required key is missing"
            lines.append(f"{path}: {where}.kind: {what} (one of: {', '.join(KINDS)})")
            continue
        try:
            single = ValidationError.from_exception_data(
                exc.title, [{"type": err["type"], "loc": clean, "input": err.get("input"),
                             **({"ctx": err["ctx"]} if "ctx" in err else {})}])
            lines.extend(format_errors(path, single, data).splitlines())
        except Exception:  # noqa: BLE001 - an error type from_exception_data cannot rebuild
            lines.append(f"{path}: {where}: {err['msg'].removeprefix('Value error, ')}")
    return "\n".join(dict.fromkeys(lines))


def _strip_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop the discriminator tag after ``checks[i]`` from an error location."""
    out: list[Any] = []
    for i, part in enumerate(loc):
        if part in CHECK_MODELS and i >= 2 and loc[i - 2] == "checks" and isinstance(loc[i - 1], int):
            continue
        out.append(part)
    return tuple(out)


def _loc_text(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """Return the keys allowed at a location of a rubric's front matter (for unknown-key errors)."""
    model: Any = RubricSpec
    for i, part in enumerate(loc):
        if isinstance(part, int):
            continue
        if part in CHECK_MODELS and i >= 2 and loc[i - 2] == "checks":
            model = CHECK_MODELS[part]
            continue
        if part == "checks" and model is RubricSpec:
            model = None  # resolved by the tag that follows
            continue
        field = getattr(model, "model_fields", {}).get(part) if model is not None else None
        model = model_of(field.annotation) if field is not None else None
    return list(getattr(model, "model_fields", {})) if model is not None else []
