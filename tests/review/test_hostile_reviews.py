"""Hostile review files get a clear error, one line per problem, and nothing is applied."""

from __future__ import annotations

import json

import pytest

from bench.core.records import Review
from bench.core.store import RunStore
from bench.testing.grids import grid, judge
from bench.testing.in_process import command, run_stages


@pytest.fixture
def exported(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url, topics=3, judges=[judge("grader", fake.url)])
    assert run_stages(tmp_path, params).returncode == 0
    path = tmp_path / "review.json"
    assert command(tmp_path, "review", "export", str(tmp_path / "runs/g"), str(path)).returncode == 0
    return path


def apply(tmp_path, path):
    return command(tmp_path, "review", "apply", str(tmp_path / "runs/g"), str(path))


def test_a_deeply_nested_file_is_one_clear_line(tmp_path, exported):
    doc = json.loads(exported.read_text())
    exported.write_text(json.dumps({**doc, "entries": []})[:-1] + ', "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    out = apply(tmp_path, exported)
    assert out.returncode == 2 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "nested too deeply to be a review file; nothing applied" in out.stderr
    nested = {**doc, "entries": [{"x": json.loads("[" * 40 + "]" * 40)}]}  # parses, but deeper than any export
    exported.write_text(json.dumps(nested))
    out = apply(tmp_path, exported)
    assert out.returncode == 2 and "nested deeper than 32 levels" in out.stderr


def test_a_huge_note_and_other_problems_are_listed_and_nothing_is_applied(tmp_path, exported):
    doc = json.loads(exported.read_text())
    doc["reviewer"] = "ann"
    first, second, third = doc["entries"][:3]
    first["review"] = {"scores": {c: 3 for c in ("relevance", "actionability", "tone")}, "note": "x" * 50_000_000}
    second["review"] = {"scores": {"relevance": 9}, "note": "off scale"}
    third["review"] = {"scores": {c: 4 for c in ("relevance", "actionability", "tone")}, "note": "fine"}
    exported.write_text(json.dumps(doc))
    out = apply(tmp_path, exported)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "entries[0].review.note: 50,000,000 characters, more than 20,000" in out.stderr
    assert "entries[1]" in out.stderr and "nothing applied" in out.stderr
    assert RunStore(tmp_path / "runs/g").read(Review) == []  # all or nothing: the good entry waits too
