"""Automated checks: cheap, deterministic tests of a candidate's answer, never its reasoning (no model call).
`run_check` never raises: an unevaluable check fails with the reason in ``detail``. Keep ``re`` patterns simple."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, Field, TypeAdapter, WrapValidator, model_validator

from bench.config._strict import Strict
from bench.config.ids import SafeId
from bench.config.program_checks import (PROGRAM_KINDS, CheckContext, CodeCheck, PluginCheck, PythonCheck,
                                         run_program_check, with_plugins)
from bench.config.reference_checks import (REFERENCE_KINDS, ChoiceCheck, ExactMatchCheck, NumericCheck,
                                           TokenF1Check, run_reference_check)
from bench.config.structured_checks import (STRUCTURED_KINDS, JsonSchemaCheck, SimilarityCheck, run_json_schema)
from bench.config.trajectory_checks import (TRAJECTORY_KINDS, MaxStepsCheck, ToolCalledCheck, ToolNotCalledCheck,
                                            ToolOrderCheck, Trajectory, run_trajectory_check)

_SHOW = 60  # characters of a value or pattern quoted in a detail
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)\r?\n?```$", re.DOTALL)


class _CheckBase(Strict):
    id: SafeId
    weight: float = Field(default=1.0, ge=0)


class RegexCheck(_CheckBase):
    """Passes when ``pattern`` (or the scenario's ``reference: <key>``) is found (``must_match: false``: is not)."""

    kind: Literal["regex"]
    pattern: str | None = None
    reference: str | None = Field(default=None, min_length=1)
    must_match: bool = True

    @model_validator(mode="after")
    def _compiles(self) -> "RegexCheck":
        if (self.pattern is None) == (self.reference is None):
            raise ValueError(f"check '{self.id}': give exactly one of pattern (a regular expression) or "
                             f"reference (the scenario's reference key holding one)")
        if self.pattern is None:
            return self
        try:
            re.compile(self.pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            raise ValueError(f"check '{self.id}': invalid regular expression {_show(self.pattern)} ({exc})") from None
        return self


class LengthCheck(_CheckBase):
    """Passes when the stripped text's characters and/or words are within the given bounds (inclusive)."""

    kind: Literal["length"]
    min_chars: int | None = Field(default=None, ge=0)
    max_chars: int | None = Field(default=None, ge=0)
    min_words: int | None = Field(default=None, ge=0)
    max_words: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> "LengthCheck":
        bounds = (self.min_chars, self.max_chars, self.min_words, self.max_words)
        if all(b is None for b in bounds):
            raise ValueError(f"check '{self.id}': give at least one of min_chars, max_chars, min_words, max_words")
        for unit, lo, hi in (("chars", self.min_chars, self.max_chars), ("words", self.min_words, self.max_words)):
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"check '{self.id}': min_{unit} ({lo}) is greater than max_{unit} ({hi})")
        return self


class JsonCheck(_CheckBase):
    """Passes when the text is valid JSON (with ``required_keys``, an object holding them), fenced if allowed."""

    kind: Literal["json"]
    required_keys: list[str] = Field(default_factory=list)
    allow_fences: bool = False


def _non_empty_values(v: list[str]) -> list[str]:
    """Return ``v``; refuse empty strings (they would match every text)."""
    if any(not s for s in v):
        raise ValueError("values cannot be empty strings")
    return v


_Values = Annotated[list[str], Field(min_length=1), AfterValidator(_non_empty_values)]


class ContainsCheck(_CheckBase):
    """Passes when all (``all: true``) or any (``all: false``) of ``values`` occur in the text."""

    kind: Literal["contains"]
    values: _Values
    all: bool = True
    case_sensitive: bool = False


class ExcludesCheck(_CheckBase):
    """Passes when none of ``values`` occurs in the text."""

    kind: Literal["excludes"]
    values: _Values
    case_sensitive: bool = False


Check = Annotated[Union[RegexCheck, LengthCheck, JsonCheck, ContainsCheck, ExcludesCheck, ExactMatchCheck,
                        NumericCheck, ChoiceCheck, TokenF1Check, ToolCalledCheck, ToolOrderCheck,
                        ToolNotCalledCheck, MaxStepsCheck, PythonCheck, CodeCheck, JsonSchemaCheck, SimilarityCheck],
              Field(discriminator="kind"), WrapValidator(with_plugins)]
"""One automated check: the union of the kinds, chosen by ``kind`` (or a plugin's, bench.core.plugins)."""

CHECK_MODELS: dict[str, type[Strict]] = {
    "regex": RegexCheck, "length": LengthCheck, "json": JsonCheck,
    "contains": ContainsCheck, "excludes": ExcludesCheck, **REFERENCE_KINDS, **TRAJECTORY_KINDS, **PROGRAM_KINDS,
    **STRUCTURED_KINDS,
}
KINDS: tuple[str, ...] = tuple(CHECK_MODELS)  # in the order messages list them

_ADAPTER: TypeAdapter[Any] = TypeAdapter(Check)


def parse_check(data: Any) -> Check:
    """Return the validated Check for a mapping like ``{id, kind, ...}`` (pydantic ValidationError if invalid)."""
    return _ADAPTER.validate_python(data)


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check on one text: ``detail`` says why in a few words; ``score`` is 0..1
    (default: 1 passed, 0 failed; a token F1 check's is the F1); not ``applicable``: no score, out of the mean."""

    id: str
    passed: bool
    detail: str
    score: float | None = None
    applicable: bool = True
    more: dict[str, Any] | None = None  # what a check that runs code adds (stdout and stderr tails)

    def __post_init__(self) -> None:
        if self.score is None and self.applicable:
            object.__setattr__(self, "score", 1.0 if self.passed else 0.0)

    def to_dict(self) -> dict[str, Any]:
        """Return the result as a plain dict (for Judgment.details; ``applicable`` only when False)."""
        out = asdict(self)
        applicable, more = out.pop("applicable"), out.pop("more")
        return {**out, **(more or {}), **({} if applicable else {"applicable": False})}


def run_check(check: Check, text: Any, reference: Mapping[str, Any] | None = None,
              trajectory: Trajectory | None = None, context: CheckContext | None = None) -> CheckResult:
    """Return the result of one check on ``text``; never raises (an unevaluable check fails). ``reference``: the
    scenario's reference values; ``trajectory``: the tool calls (None: none); ``context``: what code checks need."""
    cid = str(getattr(check, "id", "?"))
    try:
        text = _as_text(text)
        if isinstance(check, PluginCheck):
            score, passed, detail, more = run_program_check(check, text, dict(reference or {}), context)
            return CheckResult(cid, passed, detail, score, more=more)
        if getattr(check, "kind", None) in TRAJECTORY_KINDS:
            return CheckResult(cid, *run_trajectory_check(check, trajectory))
        key = getattr(check, "reference", None)
        if getattr(check, "kind", None) == "similarity":  # its embeddings are asked by bench.judge.similarity
            return CheckResult(cid, False, "a similarity check is graded with its judge's embedding_model")
        if key is not None:
            return _against_reference(check, text, key, reference)
        runner = _RUNNERS.get(getattr(check, "kind", None))
        if runner is None:
            return CheckResult(cid, False, f"unknown check kind {getattr(check, 'kind', None)!r}")
        passed, detail = runner(check, text)
        return CheckResult(cid, bool(passed), detail)
    except Exception as exc:  # noqa: BLE001 - a check must never break grading
        return CheckResult(cid, False, f"check could not run: {type(exc).__name__}: {_clip(str(exc))}")


def _against_reference(check: Any, text: str, key: str, reference: Mapping[str, Any] | None) -> CheckResult:
    """Return the result of a check that reads the scenario's reference value ``key``."""
    if not reference or key not in reference:
        return CheckResult(check.id, False, f"the scenario has no reference {_show(key)}")
    expected = reference[key]
    if check.kind == "regex":
        error = _regex_error(str(expected))
        if error is not None:
            return CheckResult(check.id, False, f"the reference {_show(str(expected))} is no regular expression ({error})")
        pattern = re.compile(str(expected))
        passed, detail = _run_regex(check, text, pattern)
        return CheckResult(check.id, passed, detail)
    score, passed, detail = run_reference_check(check, text, expected)
    return CheckResult(check.id, passed, detail, score, applicable=score is not None)


def run_checks(checks: Sequence[Check], text: Any, reference: Mapping[str, Any] | None = None,
               trajectory: Trajectory | None = None, context: CheckContext | None = None) -> list[CheckResult]:
    """Return the result of every check on ``text`` (``reference``: the scenario's; ``trajectory``: the answer's
    tool calls; ``context``: for checks that run code), in order; never raises."""
    return [run_check(c, text, reference, trajectory, context) for c in checks]


def checks_with_reference(checks: Sequence[Check]) -> list[Check]:
    """Return the checks that compare with a scenario's reference value (``reference:``), in order: what judge
    accuracy takes for ground truth (bench.analysis.accuracy), leaving a length or JSON check out."""
    return [c for c in checks if getattr(c, "reference", None) is not None]


def reference_problems(checks: Sequence[Check], references: Sequence[Mapping[str, Any] | None]) -> list[str]:
    """Return what keeps ``checks`` from running on scenarios with these ``references`` (one line each): a missing
    reference key, a reference used as a pattern that is no regular expression. Empty when every check can run."""
    problems = []
    for c in checks_with_reference(checks):
        key = c.reference  # type: ignore[attr-defined]
        lacking = [r for r in references if not r or key not in r]
        if lacking:
            have = sorted({k for r in references if r for k in r})
            problems.append(f"check '{c.id}' compares with reference '{key}', which {len(lacking)} of "
                            f"{len(references)} scenarios lack (their reference keys: {', '.join(have) or 'none'})")
        elif c.kind == "regex":
            problems += [f"check '{c.id}': the reference '{key}' {_show(str(r[key]))} is no regular expression "
                         f"({exc})" for r in references if (exc := _regex_error(str(r[key])))][:3]
    return problems


def _regex_error(pattern: str) -> str | None:
    """Return why ``pattern`` is no regular expression, or None (a data value: its FutureWarnings are not shown)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            return str(exc)
    return None


def automated_score(results: Sequence[CheckResult], checks: Sequence[Check]) -> float | None:
    """Return the weighted mean of the checks' scores in [0, 1], leaving out those that do not apply (None when
    none of weight applies); a missing result counts as failed, no checks give 0.0; ValueError for an unknown id."""
    ids = {c.id for c in checks}
    unknown = sorted({r.id for r in results} - ids)
    if unknown:
        raise ValueError(f"results for unknown check(s) {', '.join(unknown)}; expected {', '.join(sorted(ids))}")
    score = {r.id: float(r.score or 0.0) for r in results}
    out = {r.id for r in results if not r.applicable}
    total = sum(c.weight for c in checks if c.id not in out)
    if total <= 0:
        return None if sum(c.weight for c in checks) > 0 else 0.0
    return sum(c.weight * score.get(c.id, 0.0) for c in checks if c.id not in out) / total


# -- the kinds ------------------------------------------------------------------------------------------
def _as_text(text: Any) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        return text.decode("utf-8", "replace")
    return text if isinstance(text, str) else str(text)


def _run_regex(check: RegexCheck, text: str, pattern: re.Pattern[str] | None = None) -> tuple[bool, str]:
    m = (pattern or re.compile(check.pattern or "")).search(text)
    if check.must_match:
        shown = check.pattern if pattern is None else pattern.pattern
        return (True, f"matched at {m.start()}") if m else (False, f"no match for {_show(shown)}")
    return (False, f"forbidden match at {m.start()}: {_show(m.group(0))}") if m else (True, "no forbidden match")


def _run_length(check: LengthCheck, text: str) -> tuple[bool, str]:
    body = text.strip()
    chars, words = len(body), len(body.split())
    problems = []
    for n, unit, lo, hi in ((chars, "chars", check.min_chars, check.max_chars),
                            (words, "words", check.min_words, check.max_words)):
        if lo is not None and n < lo:
            problems.append(f"{n} {unit} < min {lo}")
        if hi is not None and n > hi:
            problems.append(f"{n} {unit} > max {hi}")
    if problems:
        return False, "; ".join(problems)
    return True, f"{chars} chars, {words} words"


def _run_json(check: JsonCheck, text: str) -> tuple[bool, str]:
    body = text.strip()
    if check.allow_fences:
        m = _FENCE.match(body)
        if m:
            body = m.group(1).strip()
    try:
        obj = json.loads(body)
    except RecursionError:
        return False, "invalid JSON (nested too deeply)"
    except ValueError as exc:  # JSONDecodeError, and surrogate/encoding problems
        return False, f"invalid JSON ({_clip(str(exc))})"
    if check.required_keys:
        if not isinstance(obj, dict):
            return False, f"JSON is a {type(obj).__name__}, not an object with keys {', '.join(check.required_keys)}"
        missing = [k for k in check.required_keys if k not in obj]
        if missing:
            return False, "missing key(s): " + ", ".join(_show(k) for k in missing)
    return True, "valid JSON"


def _fold(s: str, case_sensitive: bool) -> str:
    return s if case_sensitive else s.casefold()


def _run_contains(check: ContainsCheck, text: str) -> tuple[bool, str]:
    hay = _fold(text, check.case_sensitive)
    found = [v for v in check.values if _fold(v, check.case_sensitive) in hay]
    missing = [v for v in check.values if v not in found]
    if check.all:
        if missing:
            return False, "missing: " + ", ".join(_show(v) for v in missing)
        return True, "all found"
    if found:
        return True, "found: " + ", ".join(_show(v) for v in found)
    return False, "none found of: " + ", ".join(_show(v) for v in check.values)


def _run_excludes(check: ExcludesCheck, text: str) -> tuple[bool, str]:
    hay = _fold(text, check.case_sensitive)
    found = [v for v in check.values if _fold(v, check.case_sensitive) in hay]
    if found:
        return False, "found: " + ", ".join(_show(v) for v in found)
    return True, "none found"


_RUNNERS: dict[Any, Any] = {
    "regex": _run_regex, "length": _run_length, "json": _run_json,
    "contains": _run_contains, "excludes": _run_excludes, "json_schema": run_json_schema,
}


def _clip(s: str, n: int = 200) -> str:
    """Return ``s`` cut to ``n`` characters, safely encodable (lone surrogates escaped)."""
    s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    return s if len(s) <= n else s[:n] + "…"


def _show(s: str) -> str:
    """Return a short quoted spelling of a value or pattern for a detail line."""
    return "'" + _clip(s, _SHOW).replace("\n", "\\n").replace("\r", "\\r") + "'"
