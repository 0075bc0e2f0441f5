"""Every grading mode end to end on a dry judge: in-process, no server, through the real client and parsers.

HTTP, the faults and canned replies are tested against the loopback fake provider (test_modes.py);
these tests only need replies that are valid, which ``dry/<name>`` gives without a subprocess.
"""

import asyncio

import pytest

from bench.config.entries import JudgeEntry
from bench.config.rubrics import load_rubric
from bench.core.records import Scenario
from bench.judge.grader import Item, Judge, grade_items
from bench.judge.modes import GRADERS
from bench.models.client import LLM, Limits

CRITERIA = ("criteria:\n  - {id: relevance, description: on topic, scale: [1, 5], anchors: {1: unrelated, "
            "2: weak, 3: partly, 4: mostly, 5: fully}}\n  - {id: tone, description: friendly, scale: [1, 5], "
            "anchors: {1: rude, 2: cold, 3: neutral, 4: warm, 5: kind}}\n")
CHECKS = "checks:\n  - {id: short, kind: length, max_chars: 50}\n  - {id: clean, kind: excludes, values: [as an AI]}\n"
RUBRICS = {
    "rubric": "mode: rubric\n" + CRITERIA,
    "packed": "mode: rubric\n" + CRITERIA,
    "checklist": "mode: checklist\nrequirements:\n  - {id: task, text: mentions a task}\n"
                 "  - {id: short, text: is short}\n",
    "pairwise": "mode: pairwise\n",
    "automated": "mode: automated\n" + CHECKS,
    "hybrid": "mode: hybrid\n" + CRITERIA + CHECKS + "weights: {llm: 0.7, automated: 0.3}\n",
}


def dry_judge(tmp_path, mode: str) -> Judge:
    path = tmp_path / f"t-{mode}.md"
    path.write_text(f"---\nid: t-{mode}\nversion: '1'\n{RUBRICS[mode]}---\nGrade the response carefully.\n")
    entry = JudgeEntry(id="j", model="dry/judge", rubric=str(path), mode="packed" if mode == "packed" else None,
                       pack_size=4 if mode == "packed" else 0)
    return Judge(entry, load_rubric(str(path), tmp_path))


def items(mode: str, n: int = 6) -> list[Item]:
    texts = [f"Answer {i}: take a short walk after lunch." for i in range(n)]
    if mode == "pairwise":
        return [Item(Scenario(fields={"n": i}), "Give a tip.", (t, t.upper()), (f"a{i}", f"b{i}")) for i, t in
                enumerate(texts)]
    return [Item(Scenario(fields={"n": i}), "Give a tip.", (t,), (f"c{i}",)) for i, t in enumerate(texts)]


def grade(judge: Judge, work: list[Item]) -> tuple[list, int]:
    out: list = []
    llm = LLM(Limits(max_concurrency=8, timeout_s=5))

    async def go() -> None:
        await grade_items(judge, work, llm, out.append)
        await llm.aclose()

    asyncio.run(go())
    return out, llm.calls


def test_every_registered_mode_is_covered_here():
    assert set(GRADERS) <= set(RUBRICS)


@pytest.mark.parametrize("mode", sorted(RUBRICS))
def test_a_dry_judge_grades_every_item_in_every_mode(tmp_path, mode):
    judge = dry_judge(tmp_path, mode)
    work = items(mode)
    out, calls = grade(judge, work)
    orders = 2 if mode == "pairwise" else 1
    assert len(out) == len(work) * orders and all(j.ok for j in out), [j.error for j in out if not j.ok]
    if mode == "pairwise":
        assert {j.order for j in out} == {"AB", "BA"} and all(j.verdict for j in out)
    else:
        assert all(j.score is not None and 0 <= (j.score if mode in ("automated", "hybrid", "checklist") else 0) <= 1
                   for j in out)
    expected_calls = {"automated": 0, "packed": -(-len(work) // 4), "checklist": 2 * len(work),
                      "pairwise": 2 * len(work)}.get(mode, len(work))
    assert calls == expected_calls
