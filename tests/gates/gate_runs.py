"""What the gate tests share: the grid of their runs, and the test cases of a JUnit file read back."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from bench.testing.grids import generate, grid, judge, model

# Each run's model m1 is another fake model of a given quality (m2, the pairwise judge's baseline, never changes):
# "bad" is graded far lower than "good", the baseline; "peer" as well as it, in other words (so its grades differ
# from the baseline's by noise only).
QUALITY = {"good": 0.85, "bad": 0.3, "peer": 0.85, "ref": 0.6}
SCENARIOS = 12  # enough for a gate of up to 12 checks to decide at alpha 0.05 (bench.gates.decide.needed: 8)


def params(tmp: Path, url: str, name: str, m1: str, **extra) -> Path:
    """Write ``tmp/<name>.yaml``: models m1 (the fake model ``m1``) and m2, ``SCENARIOS`` scenarios, a rubric judge and a
    pairwise one against m2; ``extra`` sets more top-level keys (``gates``)."""
    return grid(tmp / f"{name}.yaml", url, name=name,
                models=[model("m1", url, name=m1), model("m2", url, name="ref")],
                scenarios=generate(topic=[f"topic {i}" for i in range(SCENARIOS)]),
                judges=[judge("grader", url, name="judge"),
                        judge("arena", url, rubric="arena-pairwise", name="judge", baseline="m2/p@v1")], **extra)


def cases(path: Path) -> dict[tuple[str, str], ET.Element]:
    """Return the test cases of a JUnit file by (gate, what it checked), after checking the counts add up."""
    root = ET.parse(path).getroot()
    found = root.findall("testsuite/testcase")
    assert int(root.get("tests")) == len(found)
    assert int(root.get("failures")) == sum(c.find("failure") is not None for c in found)
    return {(c.get("classname").removeprefix("bench.gates."), c.get("name")): c for c in found}


def failed(path: Path) -> set[tuple[str, str]]:
    return {key for key, case in cases(path).items() if case.find("failure") is not None}
