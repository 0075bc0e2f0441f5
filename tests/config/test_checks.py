"""Automated checks: every kind passes and fails as documented, and nothing ever raises on any text."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from bench.config.checks import CheckResult, automated_score, parse_check, run_check, run_checks

HOSTILE = [
    "",
    "\x00\x00null\x00bytes",
    "\ud800",  # a lone surrogate
    "ok \udfff then \ud83d",
    "a" * 1_000_000,
    "[" * 200_000,  # JSON nested beyond the recursion limit
    "\u202e\ufeff\u200b zero-width and bidi",
    None,
    b"\xff\xfe bytes",
]

ALL_KINDS = [
    {"id": "re", "kind": "regex", "pattern": r"^\w+"},
    {"id": "re-not", "kind": "regex", "pattern": r"\d{3}", "must_match": False},
    {"id": "len", "kind": "length", "min_chars": 1, "max_chars": 10, "min_words": 1, "max_words": 3},
    {"id": "js", "kind": "json", "required_keys": ["a"]},
    {"id": "js-fenced", "kind": "json", "allow_fences": True},
    {"id": "has", "kind": "contains", "values": ["null", "ok"], "all": False},
    {"id": "has-all", "kind": "contains", "values": ["a", "b"], "case_sensitive": True},
    {"id": "not", "kind": "excludes", "values": ["as an ai", "\x00"]},
]


def check(**data):
    return parse_check(data)


def result(c, text) -> tuple[bool, str]:
    r = run_check(c, text)
    assert isinstance(r, CheckResult) and r.id == c.id and isinstance(r.detail, str)
    return r.passed, r.detail


# -- each kind ------------------------------------------------------------------------------------------
def test_regex() -> None:
    c = check(id="verb", kind="regex", pattern=r"(?i)^\s*(spend|write)\b")
    assert result(c, "  Spend 20 minutes on the report.")[0] is True
    passed, detail = result(c, "You could spend time.")
    assert passed is False and "no match" in detail
    forbidden = check(id="no-list", kind="regex", pattern=r"(?m)^\s*\d+\.", must_match=False)
    assert result(forbidden, "One tip only.")[0] is True
    passed, detail = result(forbidden, "Tips:\n1. this\n2. that")
    assert passed is False and "forbidden match" in detail


def test_length() -> None:
    c = check(id="short", kind="length", max_chars=20)
    assert result(c, "  twenty chars or so \n\n")[0] is True  # measured stripped
    passed, detail = result(c, "x" * 21)
    assert passed is False and "21 chars > max 20" in detail
    words = check(id="words", kind="length", min_words=2, max_words=3)
    assert result(words, "two words")[0] is True
    assert result(words, "one")[0] is False
    assert result(words, "one two three four")[0] is False
    both = check(id="both", kind="length", min_chars=5, max_words=2)
    assert result(both, "hello there")[0] is True
    assert result(both, "hi")[0] is False


def test_length_bounds_are_validated() -> None:
    with pytest.raises(ValidationError, match="at least one of"):
        check(id="l", kind="length")
    with pytest.raises(ValidationError, match="greater than"):
        check(id="l", kind="length", min_words=5, max_words=2)
    with pytest.raises(ValidationError):
        check(id="l", kind="length", max_chars=-1)


def test_json() -> None:
    c = check(id="js", kind="json")
    assert result(c, ' {"a": 1} ')[0] is True
    assert result(c, "[1, 2]")[0] is True
    passed, detail = result(c, "{a: 1}")
    assert passed is False and "invalid JSON" in detail
    keys = check(id="keys", kind="json", required_keys=["tip", "minutes"])
    assert result(keys, '{"tip": "x", "minutes": 5}')[0] is True
    passed, detail = result(keys, '{"tip": "x"}')
    assert passed is False and "minutes" in detail
    assert result(keys, '["tip", "minutes"]')[0] is False
    fenced = '```json\n{"tip": "x", "minutes": 5}\n```'
    assert result(keys, fenced)[0] is False
    assert result(check(id="f", kind="json", required_keys=["tip"], allow_fences=True), fenced)[0] is True


def test_contains() -> None:
    c = check(id="c", kind="contains", values=["Report", "desk"])
    assert result(c, "tidy the DESK, then the report")[0] is True  # case-insensitive by default
    passed, detail = result(c, "the report only")
    assert passed is False and "desk" in detail
    anyof = check(id="any", kind="contains", values=["report", "desk"], all=False)
    assert result(anyof, "the desk")[0] is True
    assert result(anyof, "nothing")[0] is False
    cs = check(id="cs", kind="contains", values=["Report"], case_sensitive=True)
    assert result(cs, "report")[0] is False
    assert result(cs, "Report")[0] is True
    with pytest.raises(ValidationError):
        check(id="e", kind="contains", values=[])
    with pytest.raises(ValidationError):
        check(id="e", kind="contains", values=[""])


def test_excludes() -> None:
    c = check(id="x", kind="excludes", values=["as an AI", "language model"])
    assert result(c, "Spend 20 minutes outlining.")[0] is True
    passed, detail = result(c, "AS AN AI, I suggest resting.")
    assert passed is False and "as an AI" in detail
    cs = check(id="cs", kind="excludes", values=["AI"], case_sensitive=True)
    assert result(cs, "said the ai")[0] is True
    assert result(cs, "said the AI")[0] is False


def test_check_model_is_strict() -> None:
    with pytest.raises(ValidationError):
        check(id="x", kind="excludes", values=["a"], colour="red")  # unknown key
    with pytest.raises(ValidationError):
        check(id="x", kind="nope")
    with pytest.raises(ValidationError):
        check(id="bad id!", kind="json")
    with pytest.raises(ValidationError, match="invalid regular expression"):
        check(id="x", kind="regex", pattern="(unclosed")
    with pytest.raises(ValidationError):
        check(id="x", kind="json", weight=-1)
    assert check(id="x", kind="json").weight == 1.0


# -- hostile text ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t)[:20])
def test_never_raises_on_hostile_text(text: object) -> None:
    checks = [parse_check(d) for d in ALL_KINDS]
    start = time.perf_counter()
    results = run_checks(checks, text)
    assert time.perf_counter() - start < 5
    assert [r.id for r in results] == [c.id for c in checks]
    for r in results:
        assert isinstance(r.passed, bool)
        assert len(r.detail) < 1000  # details never echo the whole text
        r.detail.encode("utf-8")  # and are always encodable (lone surrogates escaped)
    assert 0.0 <= automated_score(results, checks) <= 1.0


def test_hostile_text_outcomes() -> None:
    not_ai = parse_check({"id": "n", "kind": "excludes", "values": ["\x00"]})
    assert run_check(not_ai, "a\x00b").passed is False
    big = parse_check({"id": "big", "kind": "length", "max_chars": 400})
    passed, detail = result(big, "a" * 1_000_000)
    assert passed is False and "1000000 chars" in detail
    deep = parse_check({"id": "deep", "kind": "json"})
    assert run_check(deep, "[" * 200_000).passed is False
    assert run_check(deep, '"\ud800"').passed is True  # JSON escapes are fine text
    surrogate = parse_check({"id": "s", "kind": "contains", "values": ["\ud800"]})
    assert run_check(surrogate, "x\ud800y").passed is True
    assert run_check(parse_check({"id": "r", "kind": "regex", "pattern": "."}), None).passed is False


def test_a_broken_check_fails_instead_of_raising() -> None:
    class Weird:
        id, kind, weight = "w", "martian", 1.0
    r = run_check(Weird(), "text")  # type: ignore[arg-type]
    assert r.passed is False and "unknown check kind" in r.detail


# -- score ----------------------------------------------------------------------------------------------
def test_automated_score_is_the_weighted_fraction_passed() -> None:
    checks = [check(id="a", kind="length", max_chars=5, weight=3),
              check(id="b", kind="contains", values=["x"]),
              check(id="c", kind="excludes", values=["y"], weight=0)]
    results = run_checks(checks, "xy")  # a passes (3), b passes (1), c fails (0)
    assert [r.passed for r in results] == [True, True, False]
    assert automated_score(results, checks) == pytest.approx(1.0)
    results = run_checks(checks, "zzzzzzz")  # a fails, b fails, c passes (weight 0)
    assert automated_score(results, checks) == 0.0
    results = run_checks(checks, "yyyyyyx")  # only b passes
    assert automated_score(results, checks) == pytest.approx(1 / 4)
    assert automated_score(results[1:], checks) == pytest.approx(1 / 4)  # a missing result counts as failed
    assert automated_score([], []) == 0.0
    with pytest.raises(ValueError, match="unknown check"):
        automated_score([CheckResult("zz", True, "")], checks)
