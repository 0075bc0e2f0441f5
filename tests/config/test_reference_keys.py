"""A rubric's `reference:`, `solve_first` and `show_reasoning` keys, and the reference keys a rubric names
checked against the scenarios before anything is spent (`bench validate`, `bench sweep`), naming the rubric
file and key and where the scenarios come from with the keys they have; scenarios listed in the params file
(`scenarios.inline`) carry a reference of their own."""

from __future__ import annotations

import json

import pytest

from bench.config.rubrics import parse_rubric
from bench.core.errors import ParamsError
from bench.run import open_run
from bench.testing.grids import grid, judge, prompt
from bench.testing.in_process import command, run_stages

HEAD = ("---\nid: {id}\nversion: '1'\nmode: {mode}\ncriteria:\n  - {{id: quality, description: how good, "
        "scale: [1, 2], anchors: {{1: bad, 2: good}}}}\n")


def rubric_text(extra: str, mode: str = "rubric", rid: str = "r") -> str:
    checks = "checks:\n  - {id: short, kind: length, max_chars: 50}\n" if mode in ("automated", "hybrid") else ""
    return HEAD.format(id=rid, mode=mode) + checks + extra + "---\nGrade it.\n"


def test_the_new_keys_parse_with_their_defaults(tmp_path):
    plain = parse_rubric(rubric_text(""), tmp_path / "r.md")
    assert plain.reference == [] and plain.solve_first is False and plain.show_reasoning is False
    full = parse_rubric(rubric_text("reference: [answer, unit]\nsolve_first: true\nshow_reasoning: true\n"),
                        tmp_path / "r.md")
    assert full.reference == ["answer", "unit"] and full.solve_first and full.show_reasoning


@pytest.mark.parametrize("extra,mode,expected", [
    ("reference: [answer, answer]\n", "rubric", "reference: duplicate reference key answer"),
    ("reference: answer\n", "rubric", "reference:"),
    ("solve_first: true\n", "automated", "solve_first: mode 'automated' calls no judge model"),
    ("show_reasoning: maybe\n", "rubric", "show_reasoning:"),
])
def test_a_wrong_value_names_the_file_and_the_key(tmp_path, extra, mode, expected):
    with pytest.raises(ParamsError) as err:
        parse_rubric(rubric_text(extra, mode), tmp_path / "r.md")
    assert str(err.value).startswith(f"{tmp_path / 'r.md'}: ") and expected in str(err.value)


def _dataset_params(tmp_path, url, shown: str):
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps({"q": f"question {n}", "gold": f"g{n}"}) + "\n"
                                               for n in range(2)))
    (tmp_path / "shows.md").write_text(rubric_text(f"reference: [{shown}]\n", rid="shows"))
    return grid(tmp_path / "ds.yaml", url, name="ds", prompts=[prompt("p", "{question}")],
                scenarios={"dataset": {"path": "qa.jsonl", "fields": {"question": "q"}, "reference": {"label": "gold"}}},
                judges=[judge("j", url, rubric=str(tmp_path / "shows.md"))])


def test_validate_refuses_a_reference_key_the_dataset_lacks_naming_both(tmp_path, fake):
    params = _dataset_params(tmp_path, fake.url, "answer")
    out = command(tmp_path, "validate", str(params))
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert f"{tmp_path / 'shows.md'}: reference: names answer" in text, text
    assert "qa.jsonl" in text and "gives every scenario the reference keys: label" in text and str(params) in text
    assert fake.stats()["requests"] == 0


def test_sweep_refuses_it_before_any_request(tmp_path, fake):
    params = _dataset_params(tmp_path, fake.url, "answer")
    out = run_stages(tmp_path, params)
    assert out.returncode == 2 and "reference: names answer" in out.stdout + out.stderr
    assert fake.stats()["requests"] == 0, "nothing is spent: not even the answers"


def test_a_key_the_dataset_maps_passes(tmp_path, fake):
    run = open_run(_dataset_params(tmp_path, fake.url, "label"))
    assert [s.reference for s in run.scenarios] == [{"label": "g0"}, {"label": "g1"}]
    out = command(tmp_path, "validate", str(tmp_path / "ds.yaml"))
    assert out.returncode == 0, out.stdout + out.stderr


def test_generated_scenarios_are_said_to_carry_no_reference(tmp_path, fake):
    (tmp_path / "shows.md").write_text(rubric_text("reference: [answer]\n", rid="shows"))
    params = grid(tmp_path / "gen.yaml", fake.url, judges=[judge("j", fake.url, rubric=str(tmp_path / "shows.md"))])
    out = command(tmp_path, "validate", str(params))
    assert out.returncode == 2 and "generated scenarios carry no reference" in out.stdout + out.stderr
    assert "gives every scenario the reference keys: none" in out.stdout + out.stderr


def test_inline_scenarios_carry_their_reference(tmp_path, fake):
    (tmp_path / "shows.md").write_text(rubric_text("reference: [answer]\n", rid="shows"))
    inline = [{"fields": {"topic": "moon"}, "reference": {"answer": "384,400 km"}},
              {"fields": {"topic": "sun"}, "reference": {"answer": "1 AU", "unit": "au"}}]
    params = grid(tmp_path / "inl.yaml", fake.url, scenarios={"inline": inline},
                  judges=[judge("j", fake.url, rubric=str(tmp_path / "shows.md"))])
    run = open_run(params)
    assert [(s.fields, s.reference, s.source) for s in run.scenarios] == [
        ({"topic": "moon"}, {"answer": "384,400 km"}, "inline"), ({"topic": "sun"}, {"answer": "1 AU", "unit": "au"},
                                                                  "inline")]
    out = command(tmp_path, "validate", str(params))
    assert out.returncode == 0, out.stdout + out.stderr
    inline[1]["reference"] = {"unit": "au"}
    out = command(tmp_path, "validate", str(grid(params, fake.url, scenarios={"inline": inline},
                                               judges=[judge("j", fake.url, rubric=str(tmp_path / "shows.md"))])))
    assert out.returncode == 2 and "scenarios.inline" in out.stdout + out.stderr, out.stdout + out.stderr


def test_inline_scenarios_are_checked_like_any_source(tmp_path, fake):
    twice = [{"fields": {"topic": "moon"}}, {"fields": {"topic": "moon"}}]
    with pytest.raises(ParamsError, match=r"scenarios.inline\[1\] is the same scenario as scenarios.inline\[0\]"):
        open_run(grid(tmp_path / "a.yaml", fake.url, scenarios={"inline": twice}))
    with pytest.raises(ParamsError, match="give exactly one of 'generate' or 'dataset'"):
        open_run(grid(tmp_path / "b.yaml", fake.url, scenarios={"inline": twice[:1], "generate": {
            "dimensions": {"topic": ["x"]}}}))
    with pytest.raises(ParamsError, match="topic"):  # a prompt placeholder the scenario has no field for
        open_run(grid(tmp_path / "c.yaml", fake.url, scenarios={"inline": [{"fields": {"subject": "moon"}}]}))
