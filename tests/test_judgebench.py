"""JudgeBench scoring, export and loading: a hand-made judge output file with known answers."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench.core.errors import BenchError, ParamsError
from bench.judgebench import (category_of, export_judgebench, print_score, score_file, score_judgments,
                              write_jsonl)
from bench.config.params import load_sweep
from bench.core.records import Judgment, Scenario
from bench.config.readers import load_dataset
from bench.config.scenarios import build
from bench.testing.records import judgment
from tests.repo import REPO

MIRROR = {"A>>B": "B>>A", "A>B": "B>A", "A=B": "A=B", "B>A": "A>B", "B>>A": "A>>B", None: None}


def j(decision):
    """A JudgeBench judgment object as JudgeBench writes it."""
    return {"judgment": {"judge_model": "m", "prompt": "p", "response": f"[[{decision}]]"}, "decision": decision}


# (pair_id, source, label, judgments as written in the file: the SECOND one is the raw verdict on the
# swapped order). "→" gives the verdicts mapped back to the original order and the ±1 sum.
PAIRS = [
    # p1 both right; the raw B>A on the swapped order means A>B: [A>B, A>B] → +2 correct
    #    (NOT mapping back would make it [A>B, B>A] → 0 incorrect)
    ("p1", "mmlu-pro-law", "A>B", [j("A>B"), j("B>A")]),
    # p2 one right, one tie: [B>A, A=B] → +1 correct; inconsistent
    ("p2", "mmlu-pro-health", "B>A", [j("B>A"), j("A=B")]),
    # p3 right + wrong (position bias, "A" both times): [A>B, B>A] → 0 incorrect; inconsistent
    ("p3", "livebench-reasoning", "A>B", [j("A>B"), j("A>B")]),
    # p4 both wrong: [B>A, B>A] → −2 incorrect; consistent
    ("p4", "livebench-reasoning", "A>B", [j("B>A"), j("A>B")]),
    # p5 failed call (null) + right: [None, B>A] → +1 correct; inconsistent; 1 null
    ("p5", "livebench-math", "B>A", [None, j("A>B")]),
    # p6 two unparsed replies (decision null): [None, None] → 0 incorrect; consistent (equal); 2 nulls
    ("p6", "livebench-math", "B>A", [j(None), j(None)]),
    # p7 strong labels: A>>B, and B>>A on the swapped order → [A>B, A>B] → +2 correct; consistent
    ("p7", "livecodebench", "A>B", [j("A>>B"), j("B>>A")]),
    # p8 swapped verdict decides: tie, then raw A>B on the swapped order = B>A → [A=B, B>A] → +1 correct;
    #    inconsistent (unmapped it would be −1)
    ("p8", "livecodebench", "B>A", [j("A=B"), j("A>B")]),
    # p9 single order, strong label: B>>A = B>A = label → correct
    ("p9", "mmlu-pro-math", "B>A", [j("B>>A")]),
    # p10 single order tie → incorrect
    ("p10", "livebench-reasoning", "A>B", [j("A=B")]),
    # p11 single order, failed call → incorrect; 1 null
    ("p11", "livebench-reasoning", "A>B", [None]),
]
# knowledge p1 ✓ p2 ✓ p9 ✓ → 3/3 = 100.0      reasoning p3 ✗ p4 ✗ p10 ✗ p11 ✗ → 0/4 = 0.0
# math      p5 ✓ p6 ✗      → 1/2 = 50.0       coding    p7 ✓ p8 ✓           → 2/2 = 100.0
# overall 6/11 = 54.5454… → 54.55; inconsistent p2 p3 p5 p8 = 4 (single-order pairs never count);
# nulls p5 (1) + p6 (2) + p11 (1) = 4
EXPECTED = {"overall": 54.55, "categories": {"knowledge": 100.0, "reasoning": 0.0, "math": 50.0, "coding": 100.0},
            "pairs": 11, "inconsistent": 4, "nulls": 4}


def row(pair_id, source, label, judgments):
    return {"pair_id": pair_id, "original_id": None, "source": source, "question": f"question {pair_id}",
            "response_model": "gpt-4o-2024-05-13", "response_A": f"A of {pair_id}", "response_B": f"B of {pair_id}",
            "label": label, "judge_name": "hand", "judgments": judgments}


@pytest.fixture
def handmade(tmp_path) -> Path:
    path = tmp_path / "hand.jsonl"
    path.write_text("".join(json.dumps(row(*p)) + "\n" for p in PAIRS), encoding="utf-8")
    return path


def test_score_file_handmade(handmade):
    assert score_file(handmade) == EXPECTED
    assert score_file(str(handmade)) == EXPECTED


def test_category_of():
    assert [category_of(s) for s in ("mmlu-pro-computer science", "livebench-reasoning", "livebench-math",
                                     "livecodebench", "arena")] == ["knowledge", "reasoning", "math", "coding", None]


def test_empty_category_is_null(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(row(*PAIRS[0])) + "\n\n", encoding="utf-8")  # blank lines are skipped
    assert score_file(path) == {"overall": 100.0, "categories": {"knowledge": 100.0, "reasoning": None,
                                                                 "math": None, "coding": None},
                                "pairs": 1, "inconsistent": 0, "nulls": 0}


def test_cli_json(handmade, capsys):
    assert print_score(str(handmade), as_json=True) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == EXPECTED
    assert out.count("\n") == 1  # exactly one JSON object


def test_cli_table(handmade, capsys):
    assert print_score(str(handmade)) == 0
    lines = capsys.readouterr().out.splitlines()
    table = {line.split()[0]: line.split()[1:] for line in lines if line.strip()}
    assert table["overall"] == ["11", "54.55%"]
    assert table["knowledge"] == ["3", "100.00%"]
    assert table["reasoning"] == ["4", "0.00%"]
    assert table["math"] == ["2", "50.00%"]
    assert table["coding"] == ["2", "100.00%"]
    assert table["inconsistent"][0] == "4"
    assert table["nulls"][0] == "4"


@pytest.mark.parametrize("line, problem", [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "expected one JSON object"),
    (json.dumps(row("x", "livecodebench", "A>C", [j("A>B")])), "'label'"),
    (json.dumps(row("x", "livecodebench", "A>B", [j("A>B")] * 3)), "'judgments'"),
    (json.dumps(row("x", "livecodebench", "A>B", [j("A>C")])), "unknown decision 'A>C'"),
    (json.dumps(row("x", "livecodebench", "A>B", [{"judgment": {}}])), "'decision'"),
    (json.dumps(row("p1", "livecodebench", "A>B", [j("A>B")])), "already on line 1"),
])
def test_malformed_line_names_file_and_line(tmp_path, capsys, line, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row(*PAIRS[0])) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(ParamsError, match=f"^{path}:2: .*{__import__('re').escape(problem)}"):
        score_file(path)
    assert print_score(str(path), as_json=True) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and f"{path}:2" in err


def test_missing_and_empty_files(tmp_path, capsys):
    with pytest.raises(BenchError, match="cannot read"):
        score_file(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(BenchError, match="no pairs"):
        score_file(tmp_path / "empty.jsonl")
    assert print_score(str(tmp_path / "nope.jsonl")) == 2
    assert "nope.jsonl" in capsys.readouterr().err


# ----------------------------------------------------------------------------- our records and the export


def scenario_of(pair_id, source, label, _judgments) -> Scenario:
    r = row(pair_id, source, label, [])
    return Scenario(fields={k: r[k] for k in ("question", "response_A", "response_B")},
                    reference={k: r[k] for k in ("label", "source", "pair_id", "original_id", "response_model")})


def verdict_of(scenario: Scenario, order: str, verdict=None, error=None, raw=None) -> Judgment:
    """Return the embedded judge's pairwise judgment of ``scenario``'s two responses shown in ``order``."""
    return judgment(judge_id="hand", judge_model="local/gemma-3-270m", rubric_id="arena-pairwise",
                    rubric_version="v1", mode="pairwise", candidate_ids=[f"{scenario.id}:A", f"{scenario.id}:B"],
                    scenario_id=scenario.id, order=order, verdict=verdict, error=error,
                    error_kind="parse" if error else None, raw=raw, prompt=[{"role": "user", "content": "compare"}])


def records_of(pairs):
    """Our Judgment records equivalent to the hand-made file (verdicts mapped to the original order)."""
    scenarios, judgments = {}, []
    for p in pairs:
        s = scenario_of(*p)
        scenarios[s.id] = s
        for obj, order in zip(p[3], ("AB", "BA")):
            if obj is None:
                judgments.append(verdict_of(s, order, error="timeout"))
            else:
                shown = obj["decision"]
                judgments.append(verdict_of(s, order, verdict=shown if order == "AB" else MIRROR[shown],
                                            raw=obj["judgment"]["response"]))
    return scenarios, judgments


def test_score_judgments_matches_the_file():
    scenarios, judgments = records_of(PAIRS)
    assert score_judgments(judgments, scenarios) == EXPECTED


def test_export_round_trip(tmp_path):
    scenarios, judgments = records_of(PAIRS)
    records = export_judgebench(judgments, scenarios, "gemma-judge")
    assert len(records) == len(PAIRS)
    first = records[0]
    assert list(first) == ["pair_id", "original_id", "source", "question", "response_model", "response_A",
                           "response_B", "label", "judge_name", "judgments"]
    assert first["judge_name"] == "gemma-judge" and first["pair_id"] == "p1"
    # decisions are as SHOWN to the judge (BA not mapped back), strong labels normalized, failures null
    expect_norm = {"A>>B": "A>B", "B>>A": "B>A"}
    for rec, p in zip(records, PAIRS):
        assert rec["pair_id"] == p[0]
        got = [None if o is None else o["decision"] for o in rec["judgments"]]
        assert got == [None if o is None else expect_norm.get(o["decision"], o["decision"]) for o in p[3]]
    assert records[0]["judgments"][1]["judgment"] == {"judge_model": "local/gemma-3-270m",
                                                      "prompt": [{"role": "user", "content": "compare"}],
                                                      "response": "[[B>A]]"}
    path = write_jsonl(records, tmp_path / "out" / "judge.jsonl")
    assert score_file(path) == score_judgments(judgments, scenarios) == EXPECTED


def test_export_round_trip_retries_and_missing_order(tmp_path):
    scenarios, _ = records_of(PAIRS[:2])
    s1, s2 = scenarios.values()
    judgments = [
        verdict_of(s1, "AB", error="timeout"), verdict_of(s1, "AB", verdict="A>B"),  # retried: the success counts
        verdict_of(s1, "BA", verdict="A>B"), verdict_of(s1, "BA", error="later failure"),  # success kept
        verdict_of(s2, "BA", verdict="B>>A"),  # AB never ran: a two-order pair with a null first verdict
    ]
    want = {"overall": 100.0, "categories": {"knowledge": 100.0, "reasoning": None, "math": None, "coding": None},
            "pairs": 2, "inconsistent": 1, "nulls": 1}
    assert score_judgments(judgments, scenarios) == want
    records = export_judgebench(judgments, scenarios, "x")
    assert records[1]["judgments"][0] is None and records[1]["judgments"][1]["decision"] == "A>B"
    assert score_file(write_jsonl(records, tmp_path / "j.jsonl")) == want


def test_score_judgments_refuses_mixed_judges_and_foreign_records():
    scenarios, judgments = records_of(PAIRS[:1])
    other = judgments[0].model_copy(update={"judge_id": "other", "judge_model": "x/y"})
    with pytest.raises(BenchError, match="2 judges"):
        score_judgments(judgments + [other], scenarios)
    with pytest.raises(BenchError, match="not among the scenarios"):
        score_judgments(judgments, {})
    rubric = judgments[0].model_copy(update={"mode": "rubric", "order": None})
    with pytest.raises(BenchError, match="not a pairwise judgment"):
        score_judgments([rubric], scenarios)
    plain = Scenario(fields={"question": "q"})
    with pytest.raises(BenchError, match="not a JudgeBench pair"):
        score_judgments([verdict_of(plain, "AB", verdict="A>B")], {plain.id: plain})


# ----------------------------------------------------------------------------- the real data


def _data_root() -> Path | None:
    for root in (REPO.parent / "shared" / "data", Path("/work/shared/data")):
        if (root / "judgebench" / "judgebench-gpt-4o.jsonl").is_file():
            return root
    return None


def test_params_file_loads_the_real_pairs(tmp_path):
    root = _data_root()
    if root is None:
        pytest.skip("the JudgeBench data is not under ../shared/data or /work/shared/data")
    sweep, resolved = load_sweep(REPO / "params" / "judgebench.yaml")
    assert [(j.id, j.mode, j.rubric) for j in sweep.judges] == [("gemma-judge", "pairwise", "arena-pairwise")]
    if (REPO.parent / "shared" / "data").is_dir():
        scenarios = build(sweep, resolved, REPO)  # the path written in the params file resolves
    else:  # the repo is elsewhere: read the same file where it is
        source = sweep.scenarios.dataset.model_copy(update={"path": str(root / "judgebench/judgebench-gpt-4o.jsonl")})
        scenarios = load_dataset(source, [])
    assert len(scenarios) == 350 and len({s.id for s in scenarios}) == 350
    assert all(set(s.fields) == {"question", "response_A", "response_B"} for s in scenarios)
    assert Counter(category_of(s.reference["source"]) for s in scenarios) == {
        "knowledge": 154, "reasoning": 98, "math": 56, "coding": 42}

    # an oracle judge scores 100; a judge that always answers "A" scores 0 and is inconsistent everywhere
    by_id = {s.id: s for s in scenarios}
    oracle = [verdict_of(s, o, verdict=s.reference["label"]) for s in scenarios for o in ("AB", "BA")]
    always_a = [verdict_of(s, o, verdict="A>B" if o == "AB" else "B>A") for s in scenarios for o in ("AB", "BA")]
    for judgments, overall, inconsistent in ((oracle, 100.0, 0), (always_a, 0.0, 350)):
        want = score_judgments(judgments, by_id)
        assert (want["overall"], want["pairs"], want["inconsistent"], want["nulls"]) == (overall, 350, inconsistent, 0)
        path = write_jsonl(export_judgebench(judgments, by_id, "j"), tmp_path / "real.jsonl")
        assert score_file(path) == want
