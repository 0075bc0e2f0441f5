"""The shipped example params/examples/code-tests.yaml, end to end on the fake provider: its two models pointed at
the loopback server, each scripted to answer every task with code (the mini right on 9 tasks, the nano on 5, one
of its answers half right and one an endless loop), the answers run against the dataset's tests in bubblewrap, and
the report's leaderboard giving each model's pass rate with its interval."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from bench.analysis import summarize
from bench.config.sandbox import bwrap
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from tests.repo import REPO
from bench.testing.in_process import run_stages

pytestmark = pytest.mark.skipif(bwrap() is None, reason="bubblewrap is not installed (make setup installs it)")
EXAMPLE = REPO / "params" / "examples" / "code-tests.yaml"
RIGHT = {
    "add": "def add(a, b):\n    return a + b",
    "reverse": "def reverse_words(s):\n    return ' '.join(reversed(s.split()))",
    "palindrome": "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalpha()]\n    return t == t[::-1]",
    "fizzbuzz": ("def fizzbuzz(n):\n    return ['FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz'"
                 " if i % 5 == 0 else str(i) for i in range(1, n + 1)]"),
    "primes": "def primes_below(n):\n    return [p for p in range(2, n) if all(p % d for d in range(2, p))]",
    "fib": "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
    "anagram": "def are_anagrams(a, b):\n    return sorted(a.lower()) == sorted(b.lower())",
    "flatten": ("def flatten(xs):\n    out = []\n    for x in xs:\n        out += flatten(x) if isinstance(x, list)"
                " else [x]\n    return out"),
    "vowels": "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s.lower())",
    "dedupe": "def dedupe(xs):\n    return list(dict.fromkeys(xs))",
}
WRONG = {
    "fib": "def fib(n):\n    return fib(n - 1) + fib(n - 2) if n > 1 else n",  # right, but too slow for fib(90)
    "reverse": "def reverse_words(s):\n    return ' '.join(reversed(s.split(' ')))",  # half the tests
    "primes": "def primes_below(n):\n    return [p for p in range(2, n + 1) if all(p % d for d in range(2, p))]",
    "flatten": "def flatten(xs):\n    return sum(xs, [])",
    "dedupe": "def dedupe(xs):\n    return sorted(set(xs))",
    "vowels": "def count_vowels(s):\n    while True:\n        pass",
}
MINI_WRONG = {"flatten"}  # the mini gets 9 of 10 right; the nano the 4 not in WRONG, plus dedupe's second test
CELLS = {"gpt-4.1-mini", "gpt-4.1-nano"}


def tasks() -> dict[str, str]:
    rows = [json.loads(line) for line in (EXAMPLE.parent / "data" / "code-tasks.jsonl").read_text().splitlines()]
    return {r["task"]: r["question"] for r in rows}


def replies() -> list[dict]:
    out = []
    for task, question in tasks().items():
        for name, wrong in (("gpt-4.1-mini", MINI_WRONG), ("gpt-4.1-nano", set(WRONG))):
            code = WRONG[task] if task in wrong else RIGHT[task]
            out.append({"match": question, "model": name, "content": f"Sure:\n```python\n{code}\n```\n"})
    return out


@pytest.fixture(scope="module")
def example_run(tmp_path_factory, fake_server):
    fake_server.reset()
    fake_server.configure(replies=replies())
    tmp = tmp_path_factory.mktemp("code-tests")
    data = yaml.safe_load(EXAMPLE.read_text())
    for entry in (*data["models"], *data["judges"]):
        entry.update(api_base=fake_server.url, price={"input_per_mtok": 0.4, "output_per_mtok": 1.6})
    data["scenarios"]["dataset"]["path"] = str(EXAMPLE.parent / "data" / "code-tasks.jsonl")
    data["limits"].update(timeout_s=20, retries=0)
    rubric = (REPO / "rubrics" / "code-tests.md").read_text().replace("timeout_s: 10", "timeout_s: 2")
    (tmp / "code-tests.md").write_text(rubric)
    data["judges"][0]["rubric"] = str(tmp / "code-tests.md")  # the shipped checks, a shorter time limit
    path = tmp / EXAMPLE.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = run_stages(tmp, path, report=True)
    assert out.returncode == 0, out.log
    return out.run_dir, tmp


def test_each_answer_scores_as_its_code_runs(example_run):
    run_dir, _ = example_run
    store = RunStore(run_dir)
    task = {c.id: next(t for t, q in tasks().items() if q in json.dumps(c.messages)) for c in
            store.latest(Candidate).values()}
    cells = {c.id: c.model_id for c in store.latest(Candidate).values()}
    judged = list(store.latest(Judgment).values())
    assert len(judged) == 20 and all(j.ok for j in judged)
    for j in judged:
        t, cell = task[j.candidate_ids[0]], cells[j.candidate_ids[0]]
        wrong = t in (MINI_WRONG if cell == "gpt-4.1-mini" else WRONG)
        checks = {c["id"]: c for c in j.details["checks"]}
        assert checks["passes"]["passed"] is (not wrong), (cell, t, checks)
        if cell == "gpt-4.1-nano" and t in ("fib", "vowels"):
            assert checks["passes"]["detail"] == "timed out after 2 s", checks
        if cell == "gpt-4.1-nano" and t in ("reverse", "dedupe"):
            assert j.scores["tests_passed"] == 0.5, checks["passes"]["stderr"]


def section(html: str, title: str) -> str:
    """Return the text of the report's section ``title`` (up to the next <h2>), tags and scripts dropped."""
    part = html.split(f">{title}", 1)[1].split("<h2", 1)[0]
    part = re.sub(r"<(script|style)\b.*?</\1>", " ", part, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part))


def test_the_report_shows_pass_rates_with_intervals(example_run):
    run_dir, tmp = example_run
    board = summarize(run_dir, resamples=200).board
    rates = {(r["cell"].split("/")[0], r["criterion"]): r for r in board.iter_rows(named=True)}
    assert rates[("gpt-4.1-mini", "passes")]["mean"] == pytest.approx(0.9)
    assert rates[("gpt-4.1-nano", "passes")]["mean"] == pytest.approx(0.4)
    assert rates[("gpt-4.1-nano", "tests_passed")]["mean"] == pytest.approx(0.55)  # 4 + 3 halves, of 10
    for r in rates.values():
        assert r["ci_low"] <= r["mean"] <= r["ci_high"] and r["n"] == 10
    assert rates[("gpt-4.1-nano", "passes")]["ci_low"] < 0.4 < rates[("gpt-4.1-nano", "passes")]["ci_high"]
    html = (tmp / "reports" / "example-code-tests" / "index.html").read_text()
    criteria = section(html, "Per criterion")
    print(criteria)
    for cell, mean in (("gpt-4.1-mini", "0.900"), ("gpt-4.1-nano", "0.400")):
        r = rates[(cell, "passes")]
        assert f"tests {cell} code@v1 passes {mean} " in criteria
