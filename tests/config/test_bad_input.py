"""Bad input is refused before any spend: each mistake is one actionable line naming the file, key or
item, `bench sweep` exits 2, the fake provider saw no request and nothing was written to the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.testing.in_process import run_stages

GOOD = """name: bad
models:
  - {{id: m1, model: openai/fake-a, api_base: "{url}"}}
prompts:
  - {{id: p, version: v1, user: "Tip about {{topic}}."}}
scenarios:
  generate: {{dimensions: {{topic: [a, b]}}}}
judges:
  - {{id: j, model: openai/judge, api_base: "{url}", rubric: {rubric}}}
"""
RUBRIC = """---
id: lopsided
version: "1"
mode: rubric
criteria:
  - {id: quality, description: overall, scale: [1, 5], anchors: {1: bad, 2: weak, 3: fair, 4: good}}
---
Grade it.
"""
DATASET = ('{"question": "q1", "response_A": "a", "response_B": "b"}\n'
           '{"question": "q2", "response_A": "a"}\n')
DATASET_PARAMS = """name: ds
scenarios:
  dataset: {{path: rows.jsonl, fields: {{question: question, response_A: response_A, response_B: response_B}}}}
judges:
  - {{id: j, model: openai/judge, api_base: "{url}", rubric: arena-pairwise}}
"""


def case(name: str, url: str, tmp: Path) -> tuple[list[str], list[str]]:
    """Write the files of one bad-input case; return (extra run_stages options, what the error must name)."""
    good = GOOD.format(url=url, rubric="tip-v1")
    if name == "invalid-yaml":
        (tmp / "p.yaml").write_text(good.replace("prompts:", "prompts: [\n"))
        return {}, ["p.yaml:6", "invalid YAML"]
    if name == "unknown-key":
        (tmp / "p.yaml").write_text(good.replace("prompts:", "promts:"))
        return {}, ["p.yaml", "promts"]
    if name == "missing-rubric":
        (tmp / "p.yaml").write_text(GOOD.format(url=url, rubric="tip-v9"))
        return {}, ["tip-v9", "tip-v1"]
    if name == "anchors-off-scale":
        (tmp / "lopsided.md").write_text(RUBRIC)
        (tmp / "p.yaml").write_text(GOOD.format(url=url, rubric="lopsided.md"))
        return {}, ["lopsided.md", "quality", "missing level(s) 5"]
    if name == "placeholder-missing":
        (tmp / "p.yaml").write_text(good.replace("Tip about {topic}.", "Tip about {topic} for {who}."))
        return {}, ["p.yaml", "{who}", "p@v1"]
    if name == "dataset-row-missing-field":
        (tmp / "rows.jsonl").write_text(DATASET)
        (tmp / "p.yaml").write_text(DATASET_PARAMS.format(url=url))
        return {}, ["rows.jsonl:2", "response_B"]
    if name == "refusing-api-base":
        (tmp / "p.yaml").write_text(GOOD.format(url="http://127.0.0.1:9/v1", rubric="tip-v1"))
        return {}, ["http://127.0.0.1:9/v1"]
    if name == "run-folder-not-writable":
        (tmp / "p.yaml").write_text(good)
        (tmp / "a-file").write_text("not a folder")
        return {"run_dir": str(tmp / "a-file" / "run")}, ["a-file"]
    if name == "repeats-not-positive":
        (tmp / "p.yaml").write_text(good.replace("rubric: tip-v1}", "rubric: tip-v1, repeats: 0}"))
        return {}, ["p.yaml", "repeats", "judges"]
    raise AssertionError(name)


CASES = ["invalid-yaml", "unknown-key", "missing-rubric", "anchors-off-scale", "placeholder-missing",
         "dataset-row-missing-field", "refusing-api-base", "run-folder-not-writable", "repeats-not-positive"]


@pytest.mark.parametrize("name", CASES)
def test_bad_input_is_one_actionable_line_before_any_call(tmp_path, fake, name):
    options, must_name = case(name, fake.url, tmp_path)
    out = run_stages(tmp_path, tmp_path / "p.yaml", **options)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("bench sweep: error: "), out.stderr
    for needle in must_name:
        assert needle in lines[0], (needle, lines[0])
    assert fake.stats()["requests"] == 0
    written = [p for p in (tmp_path / "runs").rglob("*.jsonl") if p.name != "scenarios.jsonl"] \
        if (tmp_path / "runs").exists() else []
    assert written == []
