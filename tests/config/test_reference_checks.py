"""Checks against a reference answer, one kind at a time: how each reads an answer, what it refuses at load,
and that none raises whatever the text or the reference."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bench.config.answer_match import as_number, choice_letter, normalize_answer, numbers, token_f1
from bench.config.checks import (automated_score, checks_with_reference, parse_check, reference_problems, run_check,
                                 run_checks)

from tests.config.test_checks import HOSTILE

REF = {"answer": "Paris", "num": "1,000", "letter": "C", "pat": r"(?i)\bparis\b", "alts": ["Lutetia", "Paris"],
       "broken": "([a-"}
KINDS = [
    {"id": "exact", "kind": "exact_match", "reference": "answer"},
    {"id": "raw", "kind": "exact_match", "reference": "answer", "normalize": False},
    {"id": "num", "kind": "numeric", "reference": "num", "tolerance": 0.5},
    {"id": "letter", "kind": "choice", "reference": "letter"},
    {"id": "f1", "kind": "token_f1", "reference": "answer"},
    {"id": "re", "kind": "regex", "reference": "pat"},
    {"id": "alts", "kind": "exact_match", "reference": "alts", "extract": r"is (\w+)"},
]


def run(check: dict, text: str, reference: dict = REF):
    return run_check(parse_check(check), text, reference)


@pytest.mark.parametrize(("text", "expected"), [
    ("The answer is (C).", "C"), ("Answer: **B**", "B"), ("final answer would be option D", "D"),
    ("(A) is wrong.\n(B) is wrong.\nC", "C"), ("C. Paris", "C"), ("[b] I think", "B"), ("(a) then (d)", "D"),
    ("I think a cat.", None), ("The answer is a long story", None), ("E", None), ("", None),
    ("Answer: A\nOn reflection, the answer is B.", "B"),  # the last statement of the answer counts
])
def test_choice_letter_reads_what_an_answer_settles_on(text, expected):
    assert choice_letter(text) == expected


def test_choice_check_compares_letters_and_takes_more_letters_when_told():
    assert run(KINDS[3], "The answer is (C)").score == 1.0
    r = run(KINDS[3], "The answer is (B)")
    assert (r.passed, r.score, r.detail) == (False, 0.0, "chose B, not C")
    ten = {"id": "l", "kind": "choice", "reference": "letter", "letters": "abcdefghij"}
    assert run(ten, "Answer: J", {"letter": "j"}).passed and not run(KINDS[3], "Answer: J", {"letter": "J"}).passed
    assert "names none of the letters ABCD" in run(KINDS[3], "C", {"letter": "Paris"}).detail


def test_numbers_are_read_as_people_write_them():
    assert numbers("pages 3-5, -2 and +4; 1,234.5 or 1e-3; 3/4 cup; x=-7; gpt4; $12 45%; 1/0") == \
        [3, 5, -2, 4, 1234.5, 1e-3, 0.75, -7, 12, 45]
    assert as_number(42) == 42 and as_number("$1,000") == 1000 and as_number("3 or 4") is None
    assert as_number(True) is None and as_number("none") is None


def test_numeric_check_takes_the_last_number_within_a_tolerance():
    assert run(KINDS[2], "First 12, then 1000.4").passed  # 0.4 off, tolerance 0.5
    r = run(KINDS[2], "1000.4 first, then 12")
    assert not r.passed and r.detail == "12 vs reference 1000 (off by 988)"
    rel = {"id": "n", "kind": "numeric", "reference": "num", "rel_tolerance": 0.01}
    assert run(rel, "990").passed and not run(rel, "989.9").passed
    exact = {"id": "n", "kind": "numeric", "reference": "num"}
    assert run(exact, "1,000").passed and run(exact, "1000.0").passed and not run(exact, "1000.001").passed
    assert run(exact, "no digits").detail == "the answer writes no number"
    assert "not applicable: the reference 'five' holds no number" in run(exact, "5", {"num": "five"}).detail


@pytest.mark.parametrize(("reference", "why"), [("Paris", "holds no number"), ("3 or 4", "holds 2 numbers"),
                                                (["Paris", "Rome"], "holds no number")])
def test_a_numeric_check_on_a_reference_with_no_number_does_not_apply_and_is_left_out(reference, why):
    num, exact = parse_check({"id": "num", "kind": "numeric", "reference": "num"}), parse_check(KINDS[0])
    r = run_check(num, "It is 5, Paris", {"num": reference})
    assert (r.applicable, r.score, r.passed) == (False, None, False) and why in r.detail
    assert r.to_dict()["applicable"] is False and "applicable" not in run(KINDS[0], "Paris").to_dict()
    both = run_checks([num, exact], "Paris", {"num": reference, "answer": "Paris"})
    assert automated_score(both, [num, exact]) == 1.0, "the mean of the checks that apply, not 0.5"
    assert automated_score(run_checks([num], "5", {"num": reference}), [num]) is None, "no check applies: no grade"
    assert run_check(num, "It is 5", {"num": [*([reference] if isinstance(reference, str) else reference), "5"]}).passed


def test_exact_match_and_token_f1_use_squad_normalisation():
    assert normalize_answer("  The  Eiffel-Tower!  ") == "eiffeltower"
    assert run(KINDS[0], "the paris.").passed and not run(KINDS[1], "paris").passed
    assert run(KINDS[1], "  Paris \n").passed
    assert token_f1("the cat sat", "a cat sat down") == pytest.approx(2 * 1 * (2 / 3) / (1 + 2 / 3))
    assert token_f1("", "") == 1.0 and token_f1("the", "cat") == 0.0
    r = run(KINDS[4], "Paris, France")
    assert r.score == pytest.approx(2 / 3) and r.passed  # P 1/2, R 1
    strict = {"id": "f", "kind": "token_f1", "reference": "answer", "threshold": 0.9}
    assert not run(strict, "Paris, France").passed and run(strict, "Paris, France").score == pytest.approx(2 / 3)


def test_a_list_of_references_takes_the_best_and_extract_picks_the_answer():
    assert run(KINDS[6], "My guess is lutetia, I think").passed
    r = run(KINDS[6], "Lutetia")
    assert not r.passed and "found no answer" in r.detail
    grouped = {"id": "g", "kind": "token_f1", "reference": "alts", "extract": "(?:x)|ANSWER: (.*)"}
    assert run(grouped, "ANSWER: old paris").score == pytest.approx(2 / 3)
    assert run(grouped, "no x here").score == 0.0  # the last match has no group: an empty answer


def test_regex_with_a_reference_takes_the_pattern_from_the_scenario():
    assert run(KINDS[5], "to PARIS we go").passed
    bad = run({"id": "b", "kind": "regex", "reference": "broken"}, "anything")
    assert not bad.passed and "no regular expression" in bad.detail


def test_a_missing_reference_fails_the_check_saying_so():
    for reference in (None, {}, {"other": 1}):
        r = run(KINDS[0], "Paris", reference)
        assert (r.passed, r.score, r.detail) == (False, 0.0, "the scenario has no reference 'answer'")


def test_reference_problems_name_the_check_the_key_and_what_the_scenarios_have():
    checks = [parse_check(c) for c in (*KINDS, {"id": "miss", "kind": "numeric", "reference": "nope"},
                                       {"id": "bad", "kind": "regex", "reference": "broken"})]
    length = parse_check({"id": "long", "kind": "length", "max_chars": 9})  # names no reference
    assert [c.id for c in checks_with_reference([length, *checks])] == [c["id"] for c in KINDS] + ["miss", "bad"]
    problems = reference_problems(checks, [REF, {**REF, "nope": 1}, None])
    assert problems[:2] == [
        "check 'exact' compares with reference 'answer', which 1 of 3 scenarios lack (their reference keys: alts, "
        "answer, broken, letter, nope, num, pat)",
        "check 'raw' compares with reference 'answer', which 1 of 3 scenarios lack (their reference keys: alts, "
        "answer, broken, letter, nope, num, pat)"]
    assert any(p.startswith("check 'miss' compares with reference 'nope', which 2 of 3") for p in problems)
    assert reference_problems(checks[:5], [REF]) == []
    assert reference_problems(checks[-1:], [REF])[0].startswith("check 'bad': the reference 'broken' '([a-' is no "
                                                                "regular expression")


def test_mistakes_in_a_reference_check_are_refused_at_load():
    for bad, msg in (({"id": "r", "kind": "regex"}, "exactly one of pattern"),
                     ({"id": "r", "kind": "regex", "pattern": "x", "reference": "a"}, "exactly one of pattern"),
                     ({"id": "e", "kind": "exact_match"}, "reference"),
                     ({"id": "e", "kind": "exact_match", "reference": ""}, "at least 1 character"),
                     ({"id": "e", "kind": "exact_match", "reference": "a", "extract": "(["}, "invalid regular"),
                     ({"id": "n", "kind": "numeric", "reference": "a", "tolerance": -1}, "greater than or equal"),
                     ({"id": "c", "kind": "choice", "reference": "a", "letters": "AAB"}, "distinct ASCII letters"),
                     ({"id": "f", "kind": "token_f1", "reference": "a", "threshold": 2}, "less than or equal"),
                     ({"id": "f", "kind": "token_f1", "reference": "a", "tolerance": 1}, "Extra inputs")):
        with pytest.raises(ValidationError, match=msg):
            parse_check(bad)


def test_a_fractional_score_weighs_into_the_automated_score():
    checks = [parse_check({**KINDS[4], "weight": 3}), parse_check(KINDS[0])]
    results = run_checks(checks, "Paris, France", REF)  # f1 2/3, exact 0
    assert automated_score(results, checks) == pytest.approx(3 * (2 / 3) / 4)


@pytest.mark.parametrize("text", HOSTILE)
def test_no_reference_check_raises_on_hostile_text_or_references(text):
    hostile_ref = {k: text for k in ("answer", "num", "letter", "pat", "alts")}
    for reference in (REF, hostile_ref, {"answer": [], "num": None, "letter": 3, "pat": "\ud800", "alts": [None]}):
        for r in run_checks([parse_check(c) for c in KINDS], text, reference):
            assert (0.0 <= r.score <= 1.0 if r.applicable else r.score is None) and len(r.detail) < 1000
