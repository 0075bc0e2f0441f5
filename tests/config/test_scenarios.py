"""Scenarios: deterministic generation, datasets with clear errors, placeholder checks, rendering."""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from bench.config import generator as sc
from bench.core.errors import ParamsError, StoreError
from bench.config.entries import PromptEntry
from bench.config.params import load_sweep
from bench.config.sources import DatasetSource, GenerateSource
from bench.core.records import Scenario
from bench.config.generator import generate
from bench.config.readers import load_dataset
from bench.config.scenarios import build, read_scenarios, write_scenarios
from bench.config.templates import check_placeholders, fill_prompt
from bench.core.store import RunStore

from tests.repo import REPO, params_files
JUDGEBENCH = "judgebench/judgebench-gpt-4o.jsonl"

DIMS = {"persona": ["nurse", "student", "designer"], "slot": ["morning", "evening"],
        "tasks": {"of": ["email", "report", "gym", "bank"], "size": [1, 2]}}


def gen(dims=DIMS, n=None, seed=0) -> list[Scenario]:
    return generate(GenerateSource(dimensions=dims, n=n), seed)


# ----------------------------------------------------------------------------- generate: full product


def test_full_product_count_and_order():
    out = gen({"a": [1, 2, 3], "b": ["x", "y"]})
    assert [s.fields for s in out] == [{"a": a, "b": b} for a in (1, 2, 3) for b in ("x", "y")]
    assert all(s.source == "generate" and s.reference is None for s in out)
    assert len({s.id for s in out}) == 6


def test_subset_dimension_enumerated_by_size_then_combination():
    out = gen({"t": {"of": ["a", "b", "c"], "size": [0, 2]}})
    assert [s.fields["t"] for s in out] == [[], ["a"], ["b"], ["c"], ["a", "b"], ["a", "c"], ["b", "c"]]


def test_full_product_with_subsets():
    out = gen()
    assert len(out) == 3 * 2 * (4 + 6)
    assert len({s.id for s in out}) == len(out)
    assert out[0].fields == {"persona": "nurse", "slot": "morning", "tasks": ["email"]}
    assert out[9].fields == {"persona": "nurse", "slot": "morning", "tasks": ["gym", "bank"]}
    assert out[10].fields["slot"] == "evening"
    assert list(out[0].fields) == ["persona", "slot", "tasks"]  # declared order


def test_values_of_any_yaml_type():
    out = gen({"x": [1, 2.5, True, None, {"k": [1]}, [1, 2]]})
    assert [s.fields["x"] for s in out] == [1, 2.5, True, None, {"k": [1]}, [1, 2]]
    assert len({s.id for s in out}) == 6


# ----------------------------------------------------------------------------- generate: seeded samples


def test_sample_is_distinct_deterministic_and_seeded():
    a = gen(n=12, seed=1)
    assert len(a) == 12 and len({s.id for s in a}) == 12
    assert [s.id for s in a] == [s.id for s in gen(n=12, seed=1)]
    assert [s.id for s in a] != [s.id for s in gen(n=12, seed=2)]


def test_sample_comes_from_the_product_in_product_order():
    full = [s.id for s in gen()]
    sample = [s.id for s in gen(n=25, seed=3)]
    positions = [full.index(i) for i in sample]
    assert positions == sorted(positions)


def test_n_at_least_the_product_gives_the_full_product():
    full = [s.id for s in gen()]
    assert [s.id for s in gen(n=60)] == full
    assert [s.id for s in gen(n=10_000, seed=5)] == full


def test_sample_does_not_touch_global_random():
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    gen(n=5, seed=9)
    assert random.random() == expected


@pytest.mark.parametrize("size", [(1, 1), (0, 2), (2, 4), (4, 4)])
def test_subset_sizes_respected_and_subsets_are_subsets(size):
    of = ["a", "b", "c", "d"]
    for n in (None, 5):
        for s in gen({"t": {"of": of, "size": list(size)}, "u": [1, 2]}, n=n, seed=4):
            picked = s.fields["t"]
            assert size[0] <= len(picked) <= size[1]
            assert len(set(picked)) == len(picked) and set(picked) <= set(of)
            assert picked == [v for v in of if v in picked]  # in the order of `of`


def test_huge_product_is_sampled_dimension_by_dimension():
    dims = {"a": list(range(300)), "b": list(range(300)), "c": list(range(300)),
            "t": {"of": [f"v{i}" for i in range(40)], "size": [0, 20]}}  # ~2.7e18 combinations
    out = gen(dims, n=300, seed=11)
    assert len(out) == 300 and len({s.id for s in out}) == 300
    assert [s.id for s in out] == [s.id for s in gen(dims, n=300, seed=11)]
    assert [s.id for s in out] != [s.id for s in gen(dims, n=300, seed=12)]
    assert all(0 <= len(s.fields["t"]) <= 20 for s in out)
    keys = [(s.fields["a"], s.fields["b"], s.fields["c"]) for s in out]
    assert keys == sorted(keys)  # product order here too


def test_huge_full_product_without_n_is_refused():
    dims = {"a": list(range(1000)), "b": list(range(1001))}
    with pytest.raises(ParamsError, match=r"1,001,000 combinations; set scenarios\.generate\.n"):
        gen(dims)


def test_huge_path_draws_the_same_scenarios_as_the_option_index():
    dims = [sc._Dim("t", list("abcdef"), (1, 4)), sc._Dim("u", [1, 2, 3])]
    assert [dims[0].option(i) for i in range(dims[0].count)] == dims[0].options()
    product = list(itertools.product(*(d.options() for d in dims)))
    assert [sc._decode(dims, i) for i in range(len(product))] == product


def test_sampling_just_above_the_enumeration_limit(monkeypatch):
    monkeypatch.setattr(sc, "ENUMERATE_LIMIT", 10)
    full = [s.id for s in gen()]
    out = [s.id for s in gen(n=50, seed=2)]  # 50 of 60 by redrawing: still distinct and ordered
    assert len(set(out)) == 50 and [full.index(i) for i in out] == sorted(full.index(i) for i in out)


def test_empty_or_repeated_dimension_values_are_refused():
    with pytest.raises(ValidationError, match="needs at least 1 value"):  # refused at load already
        gen({"a": [], "b": [1]})
    unvalidated = GenerateSource.model_construct(dimensions={"a": [], "b": [1]}, n=None)
    with pytest.raises(ParamsError, match=r"dimensions\.a: the list is empty"):  # and again here
        generate(unvalidated, 0)
    with pytest.raises(ParamsError, match=r"dimensions\.a: the value \"x\" is listed twice"):
        gen({"a": ["x", "y", "x"]})
    with pytest.raises(ParamsError, match=r"dimensions\.t: the value 2 is listed twice"):
        gen({"t": {"of": [1, 2, 2], "size": [1, 1]}})


CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from bench.config.sources import GenerateSource
    from bench.config.generator import generate
    from bench.config.scenarios import write_scenarios
    dims = {"persona": ["nurse", "student", "designer", "pilot", "chef"], "slot": ["am", "pm", "night"],
            "tasks": {"of": ["email", "report", "gym", "bank", "shop", "call"], "size": [1, 3]}}
    huge = dict(dims, x=[f"x{i}" for i in range(200)], y=[f"y{i}" for i in range(200)])
    out = Path(sys.argv[1])
    write_scenarios(out / "full", generate(GenerateSource(dimensions=dims), 0))
    write_scenarios(out / "sample", generate(GenerateSource(dimensions=dims, n=40), 3))
    write_scenarios(out / "huge", generate(GenerateSource(dimensions=huge, n=40), 3))
""")


def test_same_params_give_byte_identical_files_across_processes(tmp_path):
    files = []
    for hashseed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / hashseed)], check=True, cwd=REPO, env=env)
        files.append({k: (tmp_path / hashseed / k / "scenarios.jsonl").read_bytes()
                      for k in ("full", "sample", "huge")})
    assert files[0] == files[1]
    assert files[0]["full"].count(b"\n") == 5 * 3 * (6 + 15 + 20)
    assert files[0]["sample"].count(b"\n") == files[0]["huge"].count(b"\n") == 40


# ----------------------------------------------------------------------------- datasets


ROWS = [
    {"q": "2+2?", "a": "4", "b": "5", "gold": "A>B", "cat": "math"},
    {"q": "capital of France?", "a": "Lyon", "b": "Paris", "gold": "B>A", "cat": "geo"},
    {"q": "2+2?", "a": "4", "b": "5", "gold": "A>B", "cat": "math"},  # a duplicate of row 1
    {"q": "color of sky?", "a": "blue", "b": "green", "gold": "A>B", "cat": "sci"},
]
FIELDS = {"question": "q", "response_A": "a", "response_B": "b"}


def write_jsonl(path: Path, rows: list[dict], blank_lines: bool = False) -> Path:
    lines = [json.dumps(r) for r in rows]
    path.write_text(("\n\n".join(lines) if blank_lines else "\n".join(lines)) + "\n", encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    import polars as pl

    pl.DataFrame(rows).write_parquet(path)
    return path


def dataset(path: str, fields=FIELDS, reference=None, limit=None) -> DatasetSource:
    return DatasetSource(path=path, fields=fields, reference=reference or {}, limit=limit)


@pytest.mark.parametrize("writer, name", [(write_jsonl, "qa.jsonl"), (write_csv, "qa.csv"),
                                          (write_parquet, "qa.parquet")])
def test_dataset_formats_map_fields_and_reference(tmp_path, writer, name):
    writer(tmp_path / name, ROWS)
    out = load_dataset(dataset(name, reference={"label": "gold", "category": "cat"}), [tmp_path])
    assert len(out) == 3  # the duplicate row is kept once
    assert out[0].fields == {"question": "2+2?", "response_A": "4", "response_B": "5"}
    assert out[0].reference == {"label": "A>B", "category": "math"}
    assert [s.fields["question"] for s in out] == ["2+2?", "capital of France?", "color of sky?"]
    assert all(s.source == name for s in out)


def test_dataset_limit_keeps_first_rows(tmp_path):
    write_jsonl(tmp_path / "qa.jsonl", ROWS)
    out = load_dataset(dataset("qa.jsonl", limit=2), [tmp_path])
    assert [s.fields["question"] for s in out] == ["2+2?", "capital of France?"]
    write_parquet(tmp_path / "qa.parquet", ROWS)
    assert len(load_dataset(dataset("qa.parquet", limit=1), [tmp_path])) == 1


def test_dataset_without_reference_and_with_blank_lines(tmp_path):
    write_jsonl(tmp_path / "qa.jsonl", ROWS, blank_lines=True)
    out = load_dataset(dataset("qa.jsonl", fields={"question": "q"}), [tmp_path])
    assert [s.reference for s in out] == [None, None, None]
    assert len(out) == 3


def test_reference_is_part_of_the_identity(tmp_path):
    rows = [dict(ROWS[0]), dict(ROWS[0], gold="B>A")]
    write_jsonl(tmp_path / "qa.jsonl", rows)
    assert len(load_dataset(dataset("qa.jsonl"), [tmp_path])) == 1
    assert len(load_dataset(dataset("qa.jsonl", reference={"label": "gold"}), [tmp_path])) == 2


def test_dataset_values_keep_their_types(tmp_path):
    write_jsonl(tmp_path / "qa.jsonl", [{"q": "x", "opts": ["a", "b"], "meta": {"n": 1}, "k": None}])
    out = load_dataset(dataset("qa.jsonl", fields={"q": "q", "opts": "opts", "meta": "meta", "k": "k"}),
                       [tmp_path])
    assert out[0].fields == {"q": "x", "opts": ["a", "b"], "meta": {"n": 1}, "k": None}


def test_dataset_path_resolution_order(tmp_path):
    first, second = tmp_path / "params", tmp_path / "root"
    (first / "data").mkdir(parents=True)
    (second / "data").mkdir(parents=True)
    write_jsonl(second / "data" / "qa.jsonl", ROWS[:1])
    assert len(load_dataset(dataset("data/qa.jsonl"), [first, second])) == 1  # found in the second
    write_jsonl(first / "data" / "qa.jsonl", ROWS[:2])
    assert len(load_dataset(dataset("data/qa.jsonl"), [first, second])) == 2  # the first wins
    absolute = str(second / "data" / "qa.jsonl")
    out = load_dataset(dataset(absolute), [first])
    assert len(out) == 1 and out[0].source == absolute


def test_dataset_not_found_lists_places_tried(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    with pytest.raises(ParamsError) as info:
        load_dataset(dataset("data/missing.jsonl"), [a, b])
    message = str(info.value)
    assert len(message.splitlines()) == 1
    assert "data/missing.jsonl" in message and "not found" in message
    assert str(a / "data" / "missing.jsonl") in message and str(b / "data" / "missing.jsonl") in message
    assert "scenarios.dataset.path" in message


def test_dataset_invalid_json_names_file_and_line(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n\n{not json}\n", encoding="utf-8")
    with pytest.raises(ParamsError) as info:
        load_dataset(dataset("qa.jsonl"), [tmp_path])
    message = str(info.value)
    assert message.startswith(f"{path}:3: invalid JSON") and len(message.splitlines()) == 1


def test_dataset_line_that_is_not_an_object(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(ParamsError, match=r"qa\.jsonl:2: expected one JSON object per line, got list"):
        load_dataset(dataset("qa.jsonl"), [tmp_path])


def test_dataset_not_utf8(tmp_path):
    (tmp_path / "qa.jsonl").write_bytes(b'{"q": "\xff\xfe"}\n')
    with pytest.raises(ParamsError, match=r"qa\.jsonl: cannot read the dataset"):
        load_dataset(dataset("qa.jsonl"), [tmp_path])


def test_dataset_missing_column_names_file_line_column_and_field(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", [ROWS[0], {"q": "x", "a": "y"}])
    with pytest.raises(ParamsError) as info:
        load_dataset(dataset("qa.jsonl"), [tmp_path])
    message = str(info.value)
    assert len(message.splitlines()) == 1
    assert message.startswith(f"{path}:2: ")
    assert "column 'b'" in message and "template field 'response_B'" in message
    assert "columns: q, a" in message


def test_dataset_missing_reference_column(tmp_path):
    write_jsonl(tmp_path / "qa.jsonl", ROWS)
    with pytest.raises(ParamsError, match=r"qa\.jsonl:1: no column 'verdict', which reference key 'label'"):
        load_dataset(dataset("qa.jsonl", reference={"label": "verdict"}), [tmp_path])


def test_csv_missing_column_and_short_row(tmp_path):
    write_csv(tmp_path / "qa.csv", ROWS)
    with pytest.raises(ParamsError) as info:
        load_dataset(dataset("qa.csv", fields={"question": "question"}), [tmp_path])
    message = str(info.value)
    assert "qa.csv:2 (row 1)" in message and "column 'question'" in message
    assert "template field 'question'" in message and "columns: q, a, b, gold, cat" in message
    (tmp_path / "short.csv").write_text("q,a,b\nx,y,z\nonly,two\n", encoding="utf-8")
    with pytest.raises(ParamsError, match=r"short\.csv:3 \(row 2\): no column 'b'.*columns: q, a\)"):
        load_dataset(dataset("short.csv"), [tmp_path])


def test_parquet_missing_column(tmp_path):
    write_parquet(tmp_path / "qa.parquet", ROWS)
    with pytest.raises(ParamsError, match=r"qa\.parquet row 1: no column 'answer', which template field 'ans'"):
        load_dataset(dataset("qa.parquet", fields={"ans": "answer"}), [tmp_path])


def test_parquet_unreadable(tmp_path):
    (tmp_path / "qa.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ParamsError, match=r"qa\.parquet: cannot read the Parquet file"):
        load_dataset(dataset("qa.parquet"), [tmp_path])


def test_dataset_unknown_extension(tmp_path):
    (tmp_path / "qa.xlsx").write_bytes(b"")
    with pytest.raises(ParamsError) as info:
        load_dataset(dataset("qa.xlsx"), [tmp_path])
    message = str(info.value)
    assert "qa.xlsx" in message and "'.xlsx'" in message and ".jsonl, .csv or .parquet" in message


def test_empty_dataset(tmp_path):
    (tmp_path / "qa.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(ParamsError, match=r"qa\.jsonl: the dataset has no rows"):
        load_dataset(dataset("qa.jsonl"), [tmp_path])


def _judgebench() -> Path | None:
    for root in (REPO.parent / "shared" / "data", Path("/work/shared/data")):
        if (root / JUDGEBENCH).is_file():
            return root / JUDGEBENCH
    return None


def test_judgebench_file():
    path = _judgebench()
    if path is None:
        pytest.skip(f"{JUDGEBENCH} is not under ../shared/data or /work/shared/data")
    source = DatasetSource(path=str(path), fields={"question": "question", "response_A": "response_A",
                                                   "response_B": "response_B"},
                           reference={"label": "label", "category": "source"})
    out = load_dataset(source, [])
    assert len(out) == 350 and len({s.id for s in out}) == 350
    assert {s.reference["label"] for s in out} == {"A>B", "B>A"}
    assert any(s.reference["category"].startswith("mmlu-pro") for s in out)
    assert all(set(s.fields) == {"question", "response_A", "response_B"} for s in out)


# ----------------------------------------------------------------------------- placeholders


def prompt(user: str, system: str | None = None, id: str = "tip", version: str = "v1") -> PromptEntry:
    return PromptEntry(id=id, version=version, system=system, user=user)


def test_placeholders_present_pass():
    check_placeholders([prompt("{persona} {slot}", system="{tasks}")], gen(), Path("params/x.yaml"))
    check_placeholders([prompt("no placeholders, {{literal}}")], [], Path("params/x.yaml"))


def test_missing_placeholder_message():
    scenario = Scenario(fields={"a": 1, "b": 2})
    with pytest.raises(ParamsError) as info:
        check_placeholders([prompt("{a} {persona}")], [scenario], Path("params/x.yaml"))
    assert str(info.value) == (f"params/x.yaml: prompt tip@v1 uses {{persona}}, which scenario {scenario.id} "
                               f"lacks (its fields: a, b); add the field to the scenarios or fix the template")


def test_every_missing_placeholder_of_every_prompt_is_reported():
    scenarios = [Scenario(fields={"a": 1}), Scenario(fields={"a": 2}), Scenario(fields={"a": 1, "b": 1})]
    prompts = [prompt("{a} {b} {c}", system="{d}"), prompt("{b}", version="v2"), prompt("{a}", id="ok")]
    with pytest.raises(ParamsError) as info:
        check_placeholders(prompts, scenarios, Path("p.yaml"))
    lines = str(info.value).splitlines()
    assert [line.split(" uses ")[1].split(",")[0] for line in lines] == ["{b}", "{c}", "{d}", "{b}"]
    assert all(line.startswith("p.yaml: prompt tip@v") for line in lines)
    assert f"scenario {scenarios[0].id} (and 1 other scenarios) lacks" in lines[0]
    assert f"scenario {scenarios[0].id} (and 2 other scenarios) lacks" in lines[1]


def test_placeholder_check_is_fast_for_many_scenarios():
    many = [Scenario.model_construct(id=f"s{i}", fields={"a": i, "b": i}) for i in range(100_000)]
    check_placeholders([prompt("{a} {b}")] * 20, many, Path("p.yaml"))  # one field set: checked once
    with pytest.raises(ParamsError, match=r"\(and 99999 other scenarios\) lacks"):
        check_placeholders([prompt("{c}")], many, Path("p.yaml"))


@pytest.mark.parametrize("template, words", [
    ("Answer {q", "invalid user template"),
    ("Answer q}", "invalid user template"),
    ("Answer {}", "uses {}"),
    ("Answer {0}", "uses {0}"),
    ("Answer {q.x}", "uses {q.x}"),
    ("Answer {q[0]}", "uses {q[0]}"),
])
def test_malformed_templates_are_params_errors(template, words):
    with pytest.raises(ValidationError, match="invalid template"):  # load_sweep refuses them first
        prompt(template)
    unvalidated = PromptEntry.model_construct(id="tip", version="v1", system=None, user=template)
    with pytest.raises(ParamsError) as info:  # check_placeholders still catches one that got through
        check_placeholders([unvalidated], [Scenario(fields={"q": "x"})], Path("p.yaml"))
    message = str(info.value)
    assert message.startswith("p.yaml: prompt tip@v1: ") and words in message and "{{" in message


# ------------------------------------------------------------------------ fill_prompt


def test_render_system_and_user_with_list_dict_and_literal_braces():
    p = prompt('Tasks: {tasks}. Reply as JSON like {{"tip": "..."}} for {meta} #{n}', system="You help {who}.")
    s = Scenario(fields={"tasks": ["email", "gym"], "meta": {"b": [1, 2], "a": "é"}, "n": 3, "who": "a nurse"})
    assert fill_prompt(p, s) == [
        {"role": "system", "content": "You help a nurse."},
        {"role": "user",
         "content": 'Tasks: email, gym. Reply as JSON like {"tip": "..."} for {"b":[1,2],"a":"é"} #3'},
    ]


def test_render_without_system_and_format_specs():
    out = fill_prompt(prompt("[{x:>4}] {y!r} {z}"), Scenario(fields={"x": 7, "y": "q", "z": None}))
    assert out == [{"role": "user", "content": "[   7] 'q' None"}]


def test_render_missing_field_is_a_clear_error():
    s = Scenario(fields={"a": 1})
    with pytest.raises(ParamsError, match=rf"prompt tip@v1 uses {{b}}, which scenario {s.id} lacks"):
        fill_prompt(prompt("{a} {b}"), s)


# ----------------------------------------------------------------------------- run files


def test_write_and_read_scenarios(tmp_path):
    run = tmp_path / "runs" / "demo"
    out = gen(n=7, seed=1)
    path = write_scenarios(run, out)
    assert path == run / "scenarios.jsonl" == RunStore(run).path(Scenario)
    assert read_scenarios(run) == out
    assert [r.id for r in RunStore(run).read("scenario")] == [s.id for s in out]
    first = path.read_bytes()
    assert first == "".join(s.model_dump_json() + "\n" for s in out).encode()
    write_scenarios(run, gen(n=7, seed=1))
    assert path.read_bytes() == first
    assert sorted(p.name for p in run.iterdir()) == ["scenarios.jsonl"]  # no temp file left behind
    write_scenarios(run, out[:2])  # replaced, not appended
    assert len(read_scenarios(run)) == 2


def test_read_scenarios_errors(tmp_path):
    with pytest.raises(StoreError, match="scenarios.jsonl: cannot read"):
        read_scenarios(tmp_path)
    write_scenarios(tmp_path, gen(n=2))
    with open(tmp_path / "scenarios.jsonl", "a") as fh:
        fh.write('{"fields": 3}\n')
    with pytest.raises(StoreError, match=r"scenarios\.jsonl:3: unreadable scenario"):
        read_scenarios(tmp_path)


# ----------------------------------------------------------------------------- build


SWEEP = """\
name: t
models: [{id: m, model: openai/x}]
prompts: [{id: tip, version: v1, user: "{question} / {persona}"}]
scenarios:
"""


def sweep_file(tmp_path: Path, scenarios: str) -> Path:
    path = tmp_path / "params" / "t.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SWEEP + textwrap.indent(scenarios, "  "), encoding="utf-8")
    return path


def test_build_generate(tmp_path):
    path = sweep_file(tmp_path, "generate:\n  dimensions: {question: [q1, q2], persona: [p1, p2, p3]}\n  n: 4\n")
    sweep, resolved = load_sweep(path)
    out = build(sweep, resolved, tmp_path)
    assert len(out) == 4 and out == generate(sweep.scenarios.generate, sweep.seed)


def test_build_dataset_next_to_params_then_project_root(tmp_path):
    path = sweep_file(tmp_path, "dataset:\n  path: data/qa.jsonl\n  fields: {question: q, persona: a}\n")
    sweep, resolved = load_sweep(path)
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "qa.jsonl", ROWS)
    assert len(build(sweep, resolved, tmp_path)) == 3  # from the project root
    (tmp_path / "params" / "data").mkdir()
    write_jsonl(tmp_path / "params" / "data" / "qa.jsonl", ROWS[:1])
    out = build(sweep, resolved, tmp_path)
    assert len(out) == 1 and out[0].source == "data/qa.jsonl"  # the params folder wins


def test_build_checks_placeholders(tmp_path):
    path = sweep_file(tmp_path, "generate:\n  dimensions: {question: [q1, q2]}\n")
    sweep, resolved = load_sweep(path)
    with pytest.raises(ParamsError, match=rf"^{re.escape(str(resolved))}: prompt tip@v1 uses {{persona}}"):
        build(sweep, resolved, tmp_path)


def test_build_names_the_params_file_for_generate_errors(tmp_path):
    path = sweep_file(tmp_path, "generate:\n  dimensions: {question: [q1, q1], persona: [p]}\n")
    sweep, resolved = load_sweep(path)
    expected = rf"^{re.escape(str(resolved))}: scenarios\.generate\.dimensions\.question: the value"
    with pytest.raises(ParamsError, match=expected):
        build(sweep, resolved, tmp_path)


@pytest.mark.parametrize("path", params_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_repo_params_files_build(path):
    sweep, resolved = load_sweep(path)
    try:
        out = build(sweep, resolved, REPO)
    except ParamsError as exc:
        if sweep.scenarios.dataset is not None and "not found" in str(exc):
            pytest.skip(f"its dataset is not on this machine: {exc}")
        raise
    assert out and len({s.id for s in out}) == len(out)
    for p in sweep.prompts:
        assert fill_prompt(p, out[0])[-1]["role"] == "user"
