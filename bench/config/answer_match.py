"""How an answer is compared with a reference answer: normalised text, tokens, numbers and choice letters."""

from __future__ import annotations

import re
import string
from collections import Counter
from fractions import Fraction
from typing import Any

_PUNCTUATION = frozenset(string.punctuation)  # SQuAD removes exactly these characters
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# a number as people write it: optional sign (not after a letter, digit or dot: "pages 3-5" is 3 and 5),
# thousands groups or plain digits, optional decimals and exponent; or a simple fraction
_NUMBER = re.compile(r"(?<![\w.])(?:(?P<num>[-+]?\d+)/(?P<den>\d+)(?![\d.])"
                     r"|(?P<dec>[-+]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+))")
DEFAULT_LETTERS = "ABCD"


def normalize_answer(text: str) -> str:
    """Return SQuAD's normal form of an answer: lower case, punctuation removed, articles removed, one space."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, reference: str) -> float:
    """Return SQuAD's token F1 of two answers (their :func:`normalize_answer` tokens): 0..1; when either side
    has no token, 1 if both have none, else 0 (as SQuAD v2's script)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def numbers(text: str) -> list[float]:
    """Return the numbers ``text`` writes, in order (``1,234`` is 1234; ``3/4`` is 0.75; a ``/0`` is skipped)."""
    out = []
    for m in _NUMBER.finditer(text):
        if m.group("dec") is not None:
            out.append(float(m.group("dec").replace(",", "")))
        elif int(m.group("den")):
            out.append(float(Fraction(int(m.group("num")), int(m.group("den")))))
    return out


def as_number(value: Any) -> float | None:
    """Return the number a reference value holds: itself if numeric, else the one number its text writes
    (None for no number, or for several: ``"3 or 4"`` is no single reference)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    found = numbers(str(value))
    return found[0] if len(found) == 1 else None


def _letter_patterns(letters: str) -> list[re.Pattern[str]]:
    """Return the patterns a chosen letter is read by, most explicit first (each: the last match counts)."""
    up = re.escape(letters.upper())
    both = re.escape(letters.upper() + letters.lower())
    return [
        # "The answer is (C)", "Final answer: **B**", "answer would be option D"
        re.compile(rf"(?i:\b(?:final\s+)?answer\b)(?:\s+(?:is|would\s+be|should\s+be))?\s*[:：=]?\s*(?:\*\*|__)?"
                   rf"\s*(?i:(?:option|choice)\s+)?[\(\[]?([{up}])(?![\w])"),
        re.compile(rf"(?m)^[ \t]*(?:\*\*)?[\(\[]?([{up}])[\)\]]?(?:\*\*)?[.)]?[ \t]*$"),  # a line that is only "C"
        re.compile(rf"^\s*(?:\*\*)?[\(\[]?([{up}])(?:[\)\]]|[.:](?:\s|$))"),  # the reply starts "C." / "(C)"
        re.compile(rf"[\(\[]([{both}])[\)\]]"),  # a bracketed letter anywhere: "(c)"
    ]


def choice_letter(text: str, letters: str = DEFAULT_LETTERS) -> str | None:
    """Return the choice letter (upper case) an answer settles on, or None when it names none of ``letters``.
    The last match of the first matching pattern wins: an answer phrase ("the answer is (C)"), a line that is
    only a letter, a reply starting with one ("C. Paris"), a bracketed letter ("(c)"); never a bare "a"."""
    for pattern in _letter_patterns(letters):
        found = pattern.findall(text)
        if found:
            return found[-1].upper()
    return None


def reference_letter(value: Any, letters: str = DEFAULT_LETTERS) -> str | None:
    """Return the choice letter a reference names (``C``, ``c``, ``(C)``, ``C. Paris``), or None."""
    text = str(value).strip().strip("*()[] .:")
    if len(text) == 1 and text.upper() in letters.upper():
        return text.upper()
    return choice_letter(str(value), letters)
