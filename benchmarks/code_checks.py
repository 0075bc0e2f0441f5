"""How long a sweep grading 100 answers with `kind: code` checks takes (collect included): 50 tasks x 2 models on
the fake provider, each answer a fenced Python function (one in ten wrong), run against two test functions in
bubblewrap (target: at most 30 s on 2 cores). Run: PYTHONPATH=. python benchmarks/code_checks.py"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from bench.core.records import Judgment
from bench.core.store import RunStore
from bench.testing.fake_provider import FakeProvider
from bench.testing.grids import grid, judge, model, prompt
from bench.testing.in_process import run_stages

N_TASKS, TARGET_S = 50, 30.0
RUBRIC = """---
id: code
version: "1"
mode: automated
checks:
  - {id: passes, kind: code, reference: tests, partial: true}
---
"""


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-code-checks-") as folder:
        measure(Path(folder))


def measure(tmp: Path) -> None:
    with open(tmp / "tasks.jsonl", "w") as fh:
        for i in range(N_TASKS):
            tests = f"def test_one():\n    assert f{i}(2) == {2 * i}\n\ndef test_two():\n    assert f{i}(0) == 0\n"
            task = {"question": f"Write f{i}(x) returning {i} times x (task {i}).", "tests": tests}
            fh.write(json.dumps(task) + "\n")
    (tmp / "code.md").write_text(RUBRIC)
    replies = [{"match": f"(task {i})", "model": m,
                "content": f"```python\ndef f{i}(x):\n    return {i if (i + k) % 10 else i + 1} * x\n```"}
               for i in range(N_TASKS) for k, m in enumerate(("m1", "m2"))]
    with FakeProvider() as fake:
        fake.configure(replies=replies)
        params = grid(tmp / "code.yaml", fake.url, name="code", models=[model("m1", fake.url), model("m2", fake.url)],
                      prompts=[prompt("p", "{question}")],
                      scenarios={"dataset": {"path": "tasks.jsonl", "fields": {"question": "question"},
                                             "reference": {"tests": "tests"}}},
                      judges=[judge("tests", fake.url, rubric=str(tmp / "code.md"))])
        t0 = time.perf_counter()
        out = run_stages(tmp, params)  # the whole sweep: the 100 answers collected, each graded as it arrives
        seconds = time.perf_counter() - t0
        assert out.returncode == 0, out.log
    judged = [j for j in RunStore(out.run_dir).latest(Judgment).values() if j.ok]
    passed = sum(j.score == 1.0 for j in judged)
    print(f"{len(judged)} code checks ({passed} passed) in a whole sweep: {seconds:.1f} s, "
          f"{seconds / TARGET_S:.2f} x the {TARGET_S:.0f} s target")


if __name__ == "__main__":
    main()
