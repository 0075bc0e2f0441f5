"""Checks against a reference answer: exact match, numeric match, choice letter and token F1 (no model call).
A list of acceptable answers counts the best; ``extract`` (a regex, last match) takes the answer out first."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from bench.config._strict import Strict
from bench.config.answer_match import (DEFAULT_LETTERS, as_number, choice_letter, normalize_answer, numbers,
                                       reference_letter, token_f1)
from bench.config.ids import SafeId

Outcome = tuple[float | None, bool, str]  # (score 0..1, None: not applicable; passed, detail)
_SHOW = 40  # characters of an answer quoted in a detail


class ReferenceCheckBase(Strict):
    """What every check against a reference has: its id, weight, the reference key and an optional extractor."""

    id: SafeId
    weight: float = Field(default=1.0, ge=0)
    reference: str = Field(min_length=1)  # the scenario's reference key compared with
    extract: str | None = None  # a regex taking the answer out of the reply (last match; its group 1 if any)

    @model_validator(mode="after")
    def _extract_compiles(self) -> "ReferenceCheckBase":
        if self.extract is not None:
            try:
                re.compile(self.extract)
            except (re.error, RecursionError, OverflowError) as exc:
                raise ValueError(f"check '{self.id}': invalid regular expression in extract "
                                 f"{quote(self.extract)} ({exc})") from None
        return self


class ExactMatchCheck(ReferenceCheckBase):
    """Scores 1 when the answer equals the reference after SQuAD normalisation (or stripping only), else 0."""

    kind: Literal["exact_match"]
    normalize: bool = True


class NumericCheck(ReferenceCheckBase):
    """Scores 1 when the answer's number (the last one it writes) is within ``tolerance`` (absolute) or
    ``rel_tolerance`` (relative to the reference) of the reference's number; both 0: equal."""

    kind: Literal["numeric"]
    tolerance: float = Field(default=0.0, ge=0)
    rel_tolerance: float = Field(default=0.0, ge=0)


class ChoiceCheck(ReferenceCheckBase):
    """Scores 1 when the letter the answer settles on ("The answer is (C)") is the reference's letter."""

    kind: Literal["choice"]
    letters: str = DEFAULT_LETTERS  # the choices' letters, e.g. ABCDEFGHIJ for ten options

    @field_validator("letters")
    @classmethod
    def _letters(cls, v: str) -> str:
        if not v or not v.isalpha() or not v.isascii() or len(set(v.upper())) != len(v):
            raise ValueError(f"must be distinct ASCII letters such as ABCD (got {v!r})")
        return v.upper()


class TokenF1Check(ReferenceCheckBase):
    """Scores the SQuAD token F1 of the answer and the reference (0..1); ``passed`` when it reaches ``threshold``."""

    kind: Literal["token_f1"]
    threshold: float = Field(default=0.5, ge=0, le=1)  # only what the details call passed: the score is the F1


def extracted(pattern: str | None, text: str) -> str | None:
    """Return the answer ``pattern`` takes out of ``text`` (its last match; group 1 when it has groups), the
    whole text when there is no pattern, None when the pattern does not match."""
    if pattern is None:
        return text
    last = None
    for last in re.finditer(pattern, text):
        pass
    if last is None:
        return None
    return (last.group(1) or "") if last.re.groups else last.group(0)


def run_reference_check(check: Any, text: str, expected: Any) -> Outcome:
    """Return (score, passed, detail) of a reference check on ``text`` against the reference value ``expected``
    (a list: the best of its values counts); score None when the check does not apply to the reference."""
    options = expected if isinstance(expected, list) else [expected]
    if not options:
        return 0.0, False, "the reference is an empty list"
    if check.kind == "numeric":
        options = [v for v in options if not numeric_misfit(v)]
        if not options:
            return None, False, f"not applicable: {numeric_misfit(expected)}"
    answer = extracted(check.extract, text)
    if answer is None:
        return 0.0, False, f"extract {quote(check.extract)} found no answer"
    return max((_RUNNERS[check.kind](check, answer, value) for value in options), key=lambda o: o[0])


def numeric_misfit(expected: Any) -> str | None:
    """Return why a numeric check cannot compare with ``expected`` (no number, or several), None when it can."""
    values = expected if isinstance(expected, list) else [expected]
    if any(as_number(v) is not None for v in values):
        return None
    found = len(numbers(str(values[0]))) if values and not isinstance(values[0], bool) else 0
    return f"the reference {quote(str(expected))} holds {f'{found} numbers' if found else 'no number'}"


def _exact(check: ExactMatchCheck, answer: str, expected: Any) -> Outcome:
    norm = normalize_answer if check.normalize else str.strip
    got, want = norm(answer), norm(str(expected))
    if got == want:
        return 1.0, True, f"equals the reference {quote(want)}"
    return 0.0, False, f"{quote(got)} is not the reference {quote(want)}"


def _numeric(check: NumericCheck, answer: str, expected: Any) -> Outcome:
    want = as_number(expected)
    assert want is not None  # run_reference_check passes only values that hold one number
    found = numbers(answer)
    if not found:
        return 0.0, False, "the answer writes no number"
    got = found[-1]
    diff = abs(got - want)
    if not math.isfinite(diff):
        return 0.0, False, f"{got:g} cannot be compared with {want:g}"
    ok = diff == 0 or diff <= check.tolerance or diff <= check.rel_tolerance * abs(want)
    return (1.0 if ok else 0.0), ok, f"{got:g} vs reference {want:g} (off by {diff:g})"


def _choice(check: ChoiceCheck, answer: str, expected: Any) -> Outcome:
    want = reference_letter(expected, check.letters)
    if want is None:
        return 0.0, False, f"the reference {quote(str(expected))} names none of the letters {check.letters}"
    got = choice_letter(answer, check.letters)
    if got is None:
        return 0.0, False, f"the answer names none of the letters {check.letters}"
    return (1.0, True, f"chose {got}, the reference") if got == want else (0.0, False, f"chose {got}, not {want}")


def _f1(check: TokenF1Check, answer: str, expected: Any) -> Outcome:
    f1 = token_f1(answer, str(expected))
    return f1, f1 >= check.threshold, f"token F1 {f1:.3f} with the reference {quote(normalize_answer(str(expected)))}"


_RUNNERS: dict[str, Any] = {"exact_match": _exact, "numeric": _numeric, "choice": _choice, "token_f1": _f1}
REFERENCE_KINDS: dict[str, type[ReferenceCheckBase]] = {
    "exact_match": ExactMatchCheck, "numeric": NumericCheck, "choice": ChoiceCheck, "token_f1": TokenF1Check}


def quote(s: str, n: int = _SHOW) -> str:
    """Return a short quoted spelling of a value for a detail line (cut to ``n`` characters, one line, encodable)."""
    s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    s = s if len(s) <= n else s[:n] + "…"
    return "'" + s.replace("\n", "\\n").replace("\r", "\\r") + "'"
