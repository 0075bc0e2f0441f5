"""Rubric files: every shipped rubric loads, every mistake is a ParamsError naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from bench.config.checks import ExcludesCheck, LengthCheck, RegexCheck
from bench.core.errors import ParamsError
from bench.config.reply_schemas import response_format
from bench.config.rubric_spec import DEFAULT_LABELS
from bench.config.rubrics import Rubric, available_rubrics, load_rubric, parse_rubric

from tests.repo import REPO

SHIPPED = ["tip-v1", "arena-pairwise", "tip-checklist", "tip-hybrid"]

ANCHORS_1_5 = "    anchors: {1: awful, 2: weak, 3: fair, 4: good, 5: great}\n"

RUBRIC = """\
---
id: demo
version: v1
mode: rubric
criteria:
  - id: relevance
    description: Fits the scenario.
    scale: [1, 5]
""" + ANCHORS_1_5 + """\
  - id: tone
    description: Respectful.
    scale: [1, 5]
    weight: 3
""" + ANCHORS_1_5 + """\
---
Grade the tip.
"""


def write(root: Path, name: str, text: str) -> Path:
    folder = root / "rubrics"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(root: Path, ref: str) -> str:
    with pytest.raises(ParamsError) as info:
        load_rubric(ref, root)
    return str(info.value)


def validates(schema: dict, obj: object) -> bool:
    try:
        jsonschema.validate(obj, schema)
        return True
    except jsonschema.ValidationError:
        return False


# -- the shipped rubrics --------------------------------------------------------------------------------
@pytest.mark.parametrize("rid", SHIPPED)
def test_shipped_rubrics_load(rid: str) -> None:
    r = load_rubric(rid, REPO)
    assert r.id == rid and r.key == f"{rid}@{r.version}"
    assert r.body.strip() and len(r.hash) == 20
    assert r.path == (REPO / "rubrics" / f"{rid}.md").resolve()
    assert rid in available_rubrics(REPO)


def test_shipped_modes_and_sections() -> None:
    tip = load_rubric("tip-v1", REPO)
    assert tip.mode == "rubric" and [c.id for c in tip.criteria] == ["relevance", "actionability", "tone"]
    assert all(c.scale == (1, 5) and sorted(c.anchors) == [1, 2, 3, 4, 5] for c in tip.criteria)
    assert all("Example" in text for c in tip.criteria for text in c.anchors.values())

    arena = load_rubric("arena-pairwise", REPO)
    assert arena.mode == "pairwise" and tuple(arena.labels) == DEFAULT_LABELS
    assert "[[A>B]]" in arena.body

    checklist = load_rubric("tip-checklist", REPO)
    assert checklist.mode == "checklist" and 4 <= len(checklist.requirements) <= 5

    hybrid = load_rubric("tip-hybrid", REPO)
    assert hybrid.mode == "hybrid" and hybrid.weights is not None
    assert (hybrid.weights.llm, hybrid.weights.automated) == pytest.approx((0.7, 0.3))
    kinds = {type(c) for c in hybrid.checks}
    assert {LengthCheck, ExcludesCheck, RegexCheck} <= kinds
    assert [c.id for c in hybrid.criteria] == ["relevance", "actionability"]


def test_hybrid_checks_on_sample_tips() -> None:
    from bench.config.checks import automated_score, run_checks
    hybrid = load_rubric("tip-hybrid", REPO)
    good = "While the kids sleep, spend 20 minutes outlining the report at the kitchen table."
    bad = "As an AI, I think:\n1. rest more\n2. plan better\n" + "x" * 400
    assert automated_score(run_checks(hybrid.checks, good), hybrid.checks) == 1.0
    assert automated_score(run_checks(hybrid.checks, bad), hybrid.checks) == 0.0


def test_load_by_path_relative_to_base_then_root(tmp_path: Path) -> None:
    write(tmp_path, "demo", RUBRIC)
    base = tmp_path / "params"
    base.mkdir()
    assert load_rubric("../rubrics/demo.md", tmp_path, base=base).id == "demo"  # relative to base
    assert load_rubric("rubrics/demo.md", tmp_path, base=base).id == "demo"  # falls back to root
    assert load_rubric(str(tmp_path / "rubrics" / "demo.md"), REPO).id == "demo"  # absolute


# -- hash -----------------------------------------------------------------------------------------------
def test_hash_changes_with_one_character(tmp_path: Path) -> None:
    path = write(tmp_path, "demo", RUBRIC)
    first = load_rubric("demo", tmp_path).hash
    assert load_rubric("demo", tmp_path).hash == first  # stable
    path.write_text(RUBRIC.replace("Grade the tip.", "Grade the tip!"), encoding="utf-8")
    assert load_rubric("demo", tmp_path).hash != first
    path.write_text(RUBRIC.replace("weight: 3", "weight: 4"), encoding="utf-8")
    assert load_rubric("demo", tmp_path).hash != first


# -- refusals -------------------------------------------------------------------------------------------
def test_id_must_match_stem(tmp_path: Path) -> None:
    path = write(tmp_path, "other", RUBRIC)
    msg = error_of(tmp_path, "other")
    assert msg.startswith(str(path)) and "id" in msg and "'other'" in msg and "'demo'" in msg


@pytest.mark.parametrize("anchors, words", [
    ("{1: a, 2: b, 4: d, 5: e}", ["missing level(s) 3"]),
    ("{1: a, 2: b, 3: c, 4: d, 5: e, 6: f}", ["extra level(s) 6"]),
    ("{0: z, 1: a, 2: b, 3: c}", ["missing level(s) 4, 5", "extra level(s) 0"]),
])
def test_anchors_must_match_scale(tmp_path: Path, anchors: str, words: list[str]) -> None:
    path = write(tmp_path, "demo", RUBRIC.replace(ANCHORS_1_5, f"    anchors: {anchors}\n", 1))
    msg = error_of(tmp_path, "demo")
    assert str(path) in msg and "criteria[0]" in msg and "criterion 'relevance'" in msg
    for w in words:
        assert w in msg
    assert "tone" not in msg  # the other criterion is fine


def test_anchor_text_must_be_a_string(tmp_path: Path) -> None:
    path = write(tmp_path, "demo", RUBRIC.replace(ANCHORS_1_5, "    anchors: {1: a, 2: b, 3: c, 4: d, 5: yes}\n", 1))
    msg = error_of(tmp_path, "demo")
    assert msg.startswith(f"{path}: criteria[0].anchors: anchor(s) 5: the text must be a string; quote it")


def test_scale_must_be_increasing(tmp_path: Path) -> None:
    write(tmp_path, "demo", RUBRIC.replace("scale: [1, 5]\n", "scale: [5, 5]\n", 1))
    assert "lo < hi" in error_of(tmp_path, "demo")


@pytest.mark.parametrize("mode, section", [
    ("rubric", "criteria"), ("hybrid", "criteria"), ("checklist", "requirements"),
    ("automated", "checks"), ("hybrid", "checks"),
])
def test_mode_required_sections(tmp_path: Path, mode: str, section: str) -> None:
    sections = {
        "criteria": "criteria:\n  - {id: c, description: d, scale: [0, 1], anchors: {0: absent, 1: present}}\n",
        "requirements": "requirements:\n  - {id: r, text: do it}\n",
        "checks": "checks:\n  - {id: k, kind: length, max_chars: 10}\n",
    }
    given = "".join(text for name, text in sections.items() if name != section)
    path = write(tmp_path, "m", f"---\nid: m\nversion: '1'\nmode: {mode}\n{given}---\nGrade.\n")
    msg = error_of(tmp_path, "m")
    assert msg.startswith(f"{path}: {section}: mode '{mode}' needs at least 1")


def test_unknown_key_lists_allowed_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "demo", RUBRIC.replace("mode: rubric\n", "mode: rubric\ncolour: red\n"))
    msg = error_of(tmp_path, "demo")
    assert msg == (f"{path}: colour: unknown key 'colour' (allowed: id, version, mode, criteria, requirements, "
                   f"labels, checks, weights, max_chars, reference, solve_first, show_reasoning, images, per_turn, "
                   f"accuracy, provenance)")


def test_unknown_nested_keys_list_allowed_keys(tmp_path: Path) -> None:
    text = RUBRIC.replace("    weight: 3\n", "    weight: 3\n    colour: red\n").replace(
        "---\nGrade", "checks:\n  - {id: k, kind: contains, values: [x], bogus: 1}\n---\nGrade")
    path = write(tmp_path, "demo", text)
    lines = error_of(tmp_path, "demo").splitlines()
    assert f"{path}: criteria[1].colour: unknown key 'colour' (allowed: id, description, scale, anchors, weight)" \
        in lines
    assert f"{path}: checks[0].bogus: unknown key 'bogus' (allowed: id, weight, kind, values, all, " \
           f"case_sensitive)" in lines


def test_invalid_regex_names_rubric_and_check(tmp_path: Path) -> None:
    path = write(tmp_path, "a", "---\nid: a\nversion: '1'\nmode: automated\nchecks:\n"
                                "  - {id: ok, kind: length, max_words: 5}\n"
                                "  - {id: broken, kind: regex, pattern: '([a-z'}\n---\n")
    msg = error_of(tmp_path, "a")
    assert msg.startswith(f"{path}: checks[1]: check 'broken': invalid regular expression")


def test_check_kind_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "a", "---\nid: a\nversion: '1'\nmode: automated\nchecks:\n"
                                "  - {id: x, kind: jsn}\n  - {id: y}\n  - {id: z, kind: length}\n---\n")
    lines = error_of(tmp_path, "a").splitlines()
    assert lines[0] == f"{path}: checks[0].kind: unknown check kind 'jsn' (one of: regex, length, json, " \
                       f"contains, excludes, exact_match, numeric, choice, token_f1, tool_called, tool_order, " \
                       f"tool_not_called, max_steps, python, code, json_schema, similarity)"
    assert lines[1].startswith(f"{path}: checks[1].kind: required key is missing")
    assert "give at least one of min_chars" in lines[2]


def test_other_refusals(tmp_path: Path) -> None:
    write(tmp_path, "v", RUBRIC.replace("id: demo", "id: v").replace("version: v1", "version: 1.10"))
    assert "quotes" in error_of(tmp_path, "v")
    write(tmp_path, "n", "id: n\nversion: '1'\nmode: rubric\n")
    assert "starts with a line '---'" in error_of(tmp_path, "n")
    write(tmp_path, "o", "---\nid: o\nversion: '1'\nmode: pairwise\n")
    assert "no closing '---'" in error_of(tmp_path, "o")
    write(tmp_path, "e", "---\nid: e\nversion: '1'\nmode: pairwise\n---\n\n")
    assert "body is empty" in error_of(tmp_path, "e")
    path = write(tmp_path, "d", "---\nid: d\nid: d\nversion: '1'\nmode: pairwise\n---\nJudge.\n")
    assert error_of(tmp_path, "d").startswith(f"{path}:3: duplicate key 'id'")
    write(tmp_path, "y", "---\nid: [y\n---\nJudge.\n")
    assert "invalid YAML" in error_of(tmp_path, "y")
    write(tmp_path, "dup", RUBRIC.replace("id: demo", "id: dup").replace("id: tone", "id: relevance"))
    assert "duplicate criterion id relevance" in error_of(tmp_path, "dup")
    write(tmp_path, "w", "---\nid: w\nversion: '1'\nmode: hybrid\nweights: {llm: 0, automated: 0}\n"
                         "criteria:\n  - {id: c, description: d, scale: [0, 1], anchors: {0: absent, 1: present}}\n"
                         "checks:\n  - {id: k, kind: length, max_chars: 10}\n---\nGrade.\n")
    assert "weights: llm + automated must be greater than 0" in error_of(tmp_path, "w")


def test_missing_rubric_lists_available_ids(tmp_path: Path) -> None:
    write(tmp_path, "demo", RUBRIC)
    write(tmp_path, "other", RUBRIC.replace("id: demo", "id: other"))
    msg = error_of(tmp_path, "nope")
    assert "rubric 'nope' not found" in msg and "demo, other" in msg
    assert "demo, other" in error_of(tmp_path, "elsewhere/nope.md")
    assert "tip-v1" in error_of(REPO, "no-such-rubric")


# -- schemas --------------------------------------------------------------------------------------------
def _closed(schema: dict) -> None:
    """Assert every object in the schema is closed with all properties required."""
    if schema.get("type") == "object":
        assert schema["additionalProperties"] is False
        assert sorted(schema["required"]) == sorted(schema["properties"])
    for value in schema.values():
        if isinstance(value, dict):
            if "type" in value:
                _closed(value)
            else:
                for sub in value.values():
                    if isinstance(sub, dict):
                        _closed(sub)


def test_item_schema(tmp_path: Path) -> None:
    write(tmp_path, "demo", RUBRIC)
    r = load_rubric("demo", tmp_path)
    schema = r.item_schema()
    _closed(schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["scores"]["properties"]["tone"]["enum"] == [1, 2, 3, 4, 5]
    assert "minimum" not in str(schema)
    assert validates(schema, {"scores": {"relevance": 4, "tone": 5}, "rationale": "ok"})
    assert not validates(schema, {"scores": {"relevance": 6, "tone": 5}, "rationale": "ok"})  # out of scale
    assert not validates(schema, {"scores": {"relevance": 4}, "rationale": "ok"})  # missing criterion
    assert not validates(schema, {"scores": {"relevance": 4, "tone": 5, "x": 1}, "rationale": "ok"})
    assert not validates(schema, {"scores": {"relevance": 4, "tone": 5}})  # no rationale
    assert not validates(schema, {"scores": {"relevance": 4.5, "tone": 5}, "rationale": "ok"})


def test_packed_schema(tmp_path: Path) -> None:
    write(tmp_path, "demo", RUBRIC)
    r = load_rubric("demo", tmp_path)
    schema = r.packed_schema(["i1", "i2"])
    _closed(schema)
    assert schema["type"] == "object"
    grade = {"id": "i1", "scores": {"relevance": 3, "tone": 2}, "rationale": "fine"}
    assert validates(schema, {"grades": [grade, {**grade, "id": "i2"}]})
    assert not validates(schema, {"grades": [{**grade, "id": "i3"}]})  # an id never shown
    assert not validates(schema, {"grades": [{**grade, "scores": {"relevance": 0, "tone": 2}}]})
    assert not validates(schema, [grade])  # the top level is an object
    with pytest.raises(ValueError):
        r.packed_schema([])


def test_requirement_and_pairwise_schemas() -> None:
    checklist = load_rubric("tip-checklist", REPO)
    schema = checklist.requirement_schema()
    _closed(schema)
    assert validates(schema, {"fulfilled": True, "feedback": "quotes the task"})
    assert not validates(schema, {"fulfilled": "yes", "feedback": ""})
    arena = load_rubric("arena-pairwise", REPO)
    schema = arena.pairwise_schema()
    _closed(schema)
    assert validates(schema, {"verdict": "A>>B", "rationale": "A is correct"})
    assert not validates(schema, {"verdict": "[[A>B]]", "rationale": ""})
    assert not validates(schema, {"verdict": "A>B"})
    with pytest.raises(ValueError):
        arena.item_schema()  # a pairwise rubric has no criteria


def test_response_format_wraps_schema() -> None:
    rf = response_format(load_rubric("tip-v1", REPO).item_schema(), "grade tip@1")
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["name"] == "grade_tip_1"


# -- composite and prompt text --------------------------------------------------------------------------
def test_composite_same_scale_is_on_that_scale(tmp_path: Path) -> None:
    write(tmp_path, "demo", RUBRIC)
    r = load_rubric("demo", tmp_path)
    assert r.composite_scale == (1, 5) and r.scale_of("tone") == (1, 5)
    assert r.composite({"relevance": 1, "tone": 5}) == pytest.approx((1 * 1 + 3 * 5) / 4)
    assert r.normalized({"relevance": 1, "tone": 5}) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="missing tone"):
        r.composite({"relevance": 3})
    with pytest.raises(ValueError, match="unknown x"):
        r.composite({"relevance": 3, "tone": 3, "x": 1})
    with pytest.raises(KeyError):
        r.scale_of("nope")


def test_composite_mixed_scales_is_0_to_1(tmp_path: Path) -> None:
    text = RUBRIC.replace("scale: [1, 5]\n    weight: 3\n" + ANCHORS_1_5,
                          "scale: [0, 1]\n    weight: 3\n    anchors: {0: absent, 1: present}\n")
    write(tmp_path, "demo", text)
    r = load_rubric("demo", tmp_path)
    assert r.composite_scale == (0, 1)
    assert r.composite({"relevance": 5, "tone": 0}) == pytest.approx(0.25)
    assert r.composite({"relevance": 3, "tone": 1}) == pytest.approx((0.5 + 3) / 4)


def test_hybrid_score() -> None:
    r = load_rubric("tip-hybrid", REPO)
    assert r.hybrid_score({"relevance": 5, "actionability": 5}, 0.0) == pytest.approx(0.7)
    assert r.hybrid_score({"relevance": 1, "actionability": 1}, 1.0) == pytest.approx(0.3)


def test_parse_rubric_and_defaults(tmp_path: Path) -> None:
    r = parse_rubric("---\nid: p\nversion: 2\nmode: pairwise\n---\nJudge.\n", tmp_path / "p.md")
    assert isinstance(r, Rubric) and r.version == "2" and r.max_chars == 20000
    assert tuple(r.labels) == DEFAULT_LABELS and r.weights is None and r.body == "Judge.\n"
