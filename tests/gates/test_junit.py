"""JUnit XML of gate results: valid XML, one test case per check, a failure element on each failed one."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.gates import GateReport, GateResult, gate_table, junit_xml, write_junit

PASSED = GateResult("min", "grader · m1/p@v1", 3.0, 3.6, 3.2, 4.0, 8, True, "mean 3.6 ≥ 3")
FAILED = GateResult("max_drop", "grader · m1/p@v1", 0.2, -0.9, -1.2, -0.6, 8, False,
                    "dropped 0.9 > max_drop 0.2, and the CI of the difference [-1.2, -0.6] excludes 0: a regression")


def report(*results: GateResult, **kw) -> GateReport:
    return GateReport(Path("/runs/pr"), Path("/runs/main"), False, list(results), **kw)


def test_each_check_is_a_test_case_and_a_failed_one_carries_its_reason(tmp_path):
    path = write_junit(report(PASSED, FAILED, warnings=["judge grader: rubric tip@1 in A, tip@2 in B"]),
                       tmp_path / "out" / "gates.xml")
    root = ET.parse(path).getroot()
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "2", "1")
    [suite] = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [("bench.gates.min", "grader · m1/p@v1"),
                                                                      ("bench.gates.max_drop", "grader · m1/p@v1")]
    assert cases[0].find("failure") is None and "value 3.6" in cases[0].findtext("system-out")
    failure = cases[1].find("failure")
    assert failure.get("message") == FAILED.reason and failure.get("type") == "max_drop"
    assert "95% CI [-1.2, -0.6], bound drop <= 0.2, n 8" in failure.text
    assert "rubric tip@1 in A" in suite.findtext("system-out")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props == {"run": "/runs/pr", "baseline": "/runs/main", "strict": "false"}


def test_text_xml_cannot_hold_is_replaced_and_markup_is_escaped():
    odd = GateResult("min", "grader · <b>&\x07", math.nan, None, None, None, 0, False, "said \x1b[31m</failure>")
    root = ET.fromstring(junit_xml(report(odd)).split("\n", 1)[1])
    case = root.find("testsuite/testcase")
    assert case.get("name") == "grader · <b>&\ufffd" and case.find("failure").get("message") == "said \ufffd[31m</failure>"
    assert "bound none" in case.find("failure").text


def test_the_table_shows_every_check_and_the_closing_line():
    text = gate_table(report(PASSED, FAILED, warnings=["judge grader: rubric differs"]))
    lines = text.splitlines()
    assert lines[0] == "warning: judge grader: rubric differs"
    assert lines[2].split() == ["gate", "checked", "value", "95%", "CI", "p_holm", "bound", "verdict"]
    assert "min" in lines[3] and "3.600" in lines[3] and "[3.200, 4.000]" in lines[3] and "pass" in lines[3]
    assert "drop ≤ 0.2" in lines[4] and "FAIL" in lines[4] and FAILED.reason in lines[4]
    assert lines[-1] == "gates: 1 of 2 check(s) FAILED (exit 5)"
    assert report(PASSED).exit_code == 0 and report(PASSED, FAILED).exit_code == 5
