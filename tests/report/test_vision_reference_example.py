"""The shipped example params/examples/vision-reference.yaml, end to end on the fake provider: its models and
judges pointed at the loopback server (with a price, as for any self-hosted endpoint, and short timeouts; the
grid, dataset, images and rubrics as shipped), swept in-process with its report. Its
reasoning model thinks in ``reasoning_content``, each question gets a crafted answer (some right, some wrong)
and the LLM grader a crafted grade (agreeing with the reference checks on all but two questions), so the
report's numbers can be worked out by hand."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.in_process import run_stages
from tests.repo import REPO

EXAMPLE = REPO / "params" / "examples" / "vision-reference.yaml"
DATASET = EXAMPLE.parent / "data" / "vision-qa.jsonl"
# question start → (the model's final answer, whether the checks find it correct, the grader's grade 0/1)
ANSWERS = {
    "How many red circles": ("3", True, 1),
    "How many triangles": ("5", False, 0),
    "How many sides": ("six", True, 1),  # the reference lists "6" and "six"
    "What colour is the triangle": ("Green.", True, 1),
    "What colour is the largest": ("the orange circle", False, 1),  # checks: F1 2/3 only; the grader is lenient
    "Which shape is red": ("(C)", True, 1),
    "Is the blue circle": ("left", False, 0),
    "What number is written": ("42", True, 0),  # the grader is wrong
}
CELLS = {"o4-mini-low", "o4-mini-high"}
PRICES = {"openai/o4-mini": {"input_per_mtok": 1.1, "output_per_mtok": 4.4},
          "openai/gpt-4.1-mini": {"input_per_mtok": 0.4, "output_per_mtok": 1.6}}


def rows() -> list[dict]:
    return [json.loads(line) for line in DATASET.read_text().splitlines()]


def marker(i: int) -> str:
    return f"zq-row{i}-zq"  # in the answer's first line only: the grader's reply rule matches its prompt alone


def on_fake(tmp: Path, url: str) -> Path:
    """Write the example with every model and judge on the fake provider, at OpenAI's price (LiteLLM prices no
    self-hosted endpoint, and the example's budget needs one), into ``tmp``, its dataset path made absolute."""
    data = yaml.safe_load(EXAMPLE.read_text())
    for entry in (*data["models"], *data["judges"]):
        entry.update(api_base=url, price=PRICES[entry["model"]])
    data["scenarios"]["dataset"]["path"] = str(DATASET)
    data["limits"].update(timeout_s=20, retries=0)
    path = tmp / EXAMPLE.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def replies() -> list[dict]:
    """The grader's grades first (its prompt holds the question too), then each question's answer."""
    grades, answers = [], []
    for i, (start, (answer, _, grade)) in enumerate(ANSWERS.items()):
        grades.append({"match": marker(i), "content": json.dumps({"scores": {"correct": grade}, "rationale": "ok"})})
        answers.append({"match": start, "content": f"Looked closely ({marker(i)}).\nAnswer: {answer}"})
    return grades + answers


@pytest.fixture(scope="module")
def example_run(tmp_path_factory, fake_server):
    """Sweep the example once in-process, with its report; return (tmp folder, the fake's stats after the sweep)."""
    fake_server.reset()
    fake_server.configure(reasoning_content=["o4-mini"], replies=replies())
    tmp = tmp_path_factory.mktemp("vision-reference")
    out = run_stages(tmp, on_fake(tmp, fake_server.url), report=True)
    assert out.returncode == 0, out.log
    return tmp, fake_server.stats()


def records(tmp: Path, kind: type) -> list:
    return list(RunStore(tmp / "runs" / "example-vision-reference").latest(kind).values())


def test_the_two_efforts_are_two_cells_whose_thinking_is_kept_apart(example_run):
    tmp, _ = example_run
    cands = records(tmp, Candidate)
    assert {c.model_id for c in cands} == CELLS and len({c.id for c in cands}) == 16
    for c in cands:
        assert c.ok and c.params["reasoning_effort"] == c.model_id.removeprefix("o4-mini-")
        assert c.reasoning.startswith("fake reasoning") and "fake reasoning" not in c.output
        assert c.output.endswith(next(a for s, (a, _, _) in ANSWERS.items() if s in json.dumps(c.messages)))
    thought = {cell: {c.usage.reasoning_tokens for c in cands if c.model_id == cell} for cell in CELLS}
    assert max(thought["o4-mini-low"]) < min(thought["o4-mini-high"]), "high effort thinks longer"


def test_each_image_reached_the_provider_byte_identical_and_the_grader_saw_the_reference(example_run):
    _, stats = example_run
    files = {hashlib.sha256((DATASET.parent / r["image"]).read_bytes()).hexdigest(): r for r in rows()}
    assert set(stats["images"]) == set(files)
    collect = [b for b in stats["recent"] if "reasoning_effort" in b]
    graded = [b for b in stats["recent"] if "response_format" in b]
    assert len(collect) == 16 and all(b["max_completion_tokens"] in (4000, 16000) for b in collect)
    assert len(graded) == 8, "one grading per question: the other cell's identical answer is a cache hit"
    for body in collect + graded:
        text = json.dumps(body)
        (sha,) = re.findall(r"sha256=([0-9a-f]{64})", text)  # one image, the row's own
        assert json.dumps(files[sha]["question"])[1:-1] in text
    for body in graded:
        text = json.dumps(body)
        (sha,) = re.findall(r"sha256=([0-9a-f]{64})", text)
        reference = f"answer: {json.dumps(files[sha]['answer'])}" if isinstance(files[sha]["answer"], list) \
            else f"answer: {files[sha]['answer']}"
        assert "<reference-" in text and json.dumps(reference)[1:-1] in text
        assert "fake reasoning" not in text, "a judge sees the final answer only"


def test_the_checks_and_the_grader_score_as_worked_out(example_run):
    tmp, _ = example_run
    question = {c.id: next(s for s in ANSWERS if s in json.dumps(c.messages)) for c in records(tmp, Candidate)}
    judged = records(tmp, Judgment)
    assert len(judged) == 32 and all(j.ok for j in judged)
    for j in judged:
        _, correct, grade = ANSWERS[question[j.candidate_ids[0]]]
        if j.judge_id == "checks":
            assert (j.score >= 0.5) == correct, j.details
        else:
            assert j.scores == {"correct": grade}


def section(html: str, title: str) -> str:
    """Return the text of the report's section ``title`` (up to the next <h2>), tags and scripts dropped."""
    part = html.split(f">{title}", 1)[1].split("<h2", 1)[0]
    part = re.sub(r"<(script|style)\b.*?</\1>", " ", part, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part))


def test_the_report_shows_the_checks_the_judge_accuracy_and_the_thumbnails(example_run):
    tmp, _ = example_run
    html = (tmp / "reports" / "example-vision-reference" / "index.html").read_text()
    # checks per question: exact 1 0 1 1 0 1 0 1; f1 the same but 2/3 on "the orange circle"; composite (2·exact+f1)/3
    board, criteria = section(html, "Leaderboard"), section(html, "Per criterion")
    for cell in CELLS:
        assert f"checks {cell} vision-qa@v1 0.653 " in board and f"grader {cell} vision-qa@v1 0.625 " in board
        assert f"checks {cell} vision-qa@v1 exact 0.625 " in criteria
        assert f"checks {cell} vision-qa@v1 f1 0.708 " in criteria
    # the grader agrees with the checks on all but "the orange circle" and "42", in both cells: 12 of 16
    accuracy = section(html, "Judge accuracy against ground truth")
    for category, numbers in {"all": "0.750", "colour": "0.500", "counting": "1.000", "reading": "0.000",
                              "shapes": "1.000"}.items():
        assert f"grader checks of checks {category} {numbers} " in accuracy, accuracy
    images = html.split(">Images", 1)[1].split("<h2", 1)[0]
    assert images.count('src="data:image/jpeg;base64,') == len(rows())  # a thumbnail per scenario, embedded
    for r in rows():
        assert f'alt="{r["image"]}"' in images and r["question"] in images  # named as the dataset names it
        assert base64.b64encode((DATASET.parent / r["image"]).read_bytes()).decode()[:120] not in html, "never in full"
    usage = section(html, "Cost, tokens and latency")
    for cell in CELLS:  # the usage table's row of the cell: calls … reasoning_tokens, then its cost
        row = usage.split(f"{cell} vision-qa@v1 ", 1)[1].split(" $", 1)[0].split()
        thought = sum(c.usage.reasoning_tokens for c in records(tmp, Candidate) if c.model_id == cell)
        assert row[0] == "8" and row[-1] == str(thought), row
