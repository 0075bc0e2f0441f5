"""The front matter of a rubric file, validated (`RubricSpec`): mode, criteria, requirements, labels, checks,
hybrid weights and what the judge is shown."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, ValidationInfo, field_validator, model_validator

from bench.config._strict import Strict, refuse_duplicates
from bench.config.checks import KINDS, Check
from bench.config.ids import SafeId
from bench.core.records import JudgeMode, versioned

# A rubric's mode is a judge's mode but packed: packed puts rubric-mode items in one call, a judge's choice.
RUBRIC_MODES: tuple[str, ...] = tuple(mode for mode in get_args(JudgeMode) if mode != "packed")
RubricMode = Literal[RUBRIC_MODES]  # type: ignore[valid-type]
DEFAULT_LABELS: tuple[str, ...] = ("A>>B", "A>B", "A=B", "B>A", "B>>A")
# ``per_turn`` grades one conversation's turns one by one: meaningless where two answers are compared (their turns
# do not pair up) or where no judge reads the conversation (the checks read the whole trajectory)
PER_TURN_MODES: tuple[str, ...] = ("rubric", "checklist", "hybrid")
# what each mode grades with: a rubric of that mode, or a judge entry whose own ``mode:`` names it, needs at least one
NEEDS: dict[str, tuple[str, ...]] = {"rubric": ("criteria",), "packed": ("criteria",), "hybrid": ("criteria", "checks"),
                                     "checklist": ("requirements",), "automated": ("checks",)}
PART_TEXT = {"criteria": "criterion (id, description, scale, anchors)", "requirements": "requirement (id, text)",
             "checks": f"check (id, kind: {' | '.join(KINDS)})"}
_PART_NOUNS = {"criteria": ("criterion", "criteria's"), "requirements": ("requirement", None),
               "checks": ("check", "checks'")}  # (an id's noun, whose weights must not sum to 0)


class Criterion(Strict):
    """One graded dimension: an integer scale ``[lo, hi]`` with an anchor text for every level."""

    id: SafeId
    description: str
    scale: tuple[int, int]
    anchors: dict[int, str]
    weight: float = Field(default=1.0, ge=0)

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


class Requirement(Strict):
    """One yes/no requirement of a checklist rubric (each is asked of the judge separately)."""

    id: SafeId
    text: str


class HybridWeights(Strict):
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


class RubricSpec(Strict):
    """The front matter of a rubric file (these are exactly the keys a rubric file may use)."""

    id: SafeId
    version: str
    mode: RubricMode
    criteria: list[Criterion] = Field(default_factory=list, validate_default=True)
    requirements: list[Requirement] = Field(default_factory=list, validate_default=True)
    labels: list[str] = Field(default_factory=lambda: list(DEFAULT_LABELS), validate_default=True)
    checks: list[Check] = Field(default_factory=list, validate_default=True)
    weights: HybridWeights | None = Field(default=None, validate_default=True)
    max_chars: int = Field(default=20000, gt=0)  # candidate text a judge sees; the judge truncates with a note
    reference: list[str] = Field(default_factory=list)  # scenario reference keys shown to the judge, in this order
    solve_first: bool = False  # the judge answers the question itself first (one cached request per question)
    show_reasoning: bool = False  # the judge also sees the candidate's reasoning (off: only its final answer)
    images: bool = False  # the judge also sees the scenario's images (scenarios.dataset.images), after the text
    per_turn: bool = False  # one judgment per assistant turn of a conversation, in its context (Judgment.turn)
    accuracy: bool | None = None  # measured against ground truth; unset: pairwise, or a reference shown or checked
    provenance: dict[str, Any] | None = None  # where this version came from (`bench align` writes it); never shown

    @field_validator("reference")
    @classmethod
    def _reference(cls, v: list[str]) -> list[str]:
        if any(not k.strip() for k in v):
            raise ValueError("reference keys cannot be empty")
        refuse_duplicates("reference key", v)
        return v

    @field_validator("solve_first")
    @classmethod
    def _solve_first(cls, v: bool, info: ValidationInfo) -> bool:
        if v and info.data.get("mode") == "automated":
            raise ValueError("mode 'automated' calls no judge model, so there is no judge to answer first; "
                             "remove solve_first or use mode hybrid")
        return v

    @field_validator("per_turn")
    @classmethod
    def _per_turn(cls, v: bool, info: ValidationInfo) -> bool:
        mode = info.data.get("mode")
        if v and mode is not None and mode not in PER_TURN_MODES:
            raise ValueError(per_turn_refusal(mode))
        return v

    @property
    def key(self) -> str:
        """Return ``id@version``, the rubric's name in judgments and reports."""
        return versioned(self.id, self.version)

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

    @field_validator("criteria", "requirements", "checks")
    @classmethod
    def _parts(cls, v: list[Any], info: ValidationInfo) -> list[Any]:
        part = str(info.field_name)
        _needed(info.data.get("mode"), part, v)
        noun, whose = _PART_NOUNS[part]
        refuse_duplicates(f"{noun} id", [p.id for p in v])
        if whose and v and sum(p.weight for p in v) <= 0:
            raise ValueError(f"the {whose} weights sum to 0; give at least one a positive weight")
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: list[str]) -> list[str]:
        if len(v) < 2:
            raise ValueError("needs at least 2 labels")
        if any(not s.strip() for s in v):
            raise ValueError("labels cannot be empty")
        refuse_duplicates("label", v)
        return v

    @field_validator("weights")
    @classmethod
    def _weights(cls, v: HybridWeights | None, info: ValidationInfo) -> HybridWeights | None:
        if v is None and info.data.get("mode") == "hybrid":
            return HybridWeights(llm=1.0, automated=1.0)  # omitted: an even mix
        return v


def _needed(mode: str | None, part: str, value: list[Any]) -> None:
    if not value and part in NEEDS.get(mode or "", ()):
        raise ValueError(f"mode '{mode}' needs at least 1 {PART_TEXT[part]}")


def mode_refusal(spec: RubricSpec, mode: str) -> str | None:
    """Return why a judge cannot grade in ``mode`` (its entry's own ``mode:``) with rubric ``spec``, and what to do;
    None when it can (the rubric has every part the mode grades with)."""
    if spec.per_turn and mode not in (*PER_TURN_MODES, "packed"):
        return f"(per_turn: true): {per_turn_refusal(mode)}"
    missing = [part for part in NEEDS.get(mode, ()) if not getattr(spec, part)]
    if not missing:
        return None
    return (f"(mode: {spec.mode}) has no {missing[0]}: mode '{mode}' needs at least 1 {PART_TEXT[missing[0]]}; "
            f"drop the judge's mode: to grade as the rubric says, or name a rubric written for mode '{mode}'")


def per_turn_refusal(mode: str) -> str:
    """Return why ``per_turn: true`` cannot go with ``mode`` and what to do instead."""
    why = ("compares two answers, whose turns do not pair up" if mode == "pairwise" else
           "calls no judge: its checks read the whole answer and trajectory" if mode == "automated" else
           "grades no conversation turn by turn")
    return (f"grading turn by turn has no meaning in mode '{mode}' (it {why}); remove per_turn, or use mode "
            f"{', '.join(PER_TURN_MODES[:-1])} or {PER_TURN_MODES[-1]}")
