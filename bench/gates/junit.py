"""Gate results as JUnit XML (GitHub Actions, GitLab, Jenkins): one ``<testcase>`` per check, classname
``bench.gates.<gate>``, its value in ``<system-out>`` and a ``<failure>`` saying why."""

from __future__ import annotations

import math
import os
import re
import tempfile
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

from bench.gates.evaluate import GateReport, GateResult

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")  # characters XML 1.0 cannot hold at all


def junit_xml(report: GateReport) -> str:
    """Return the JUnit XML document of ``report`` (UTF-8 text with its declaration)."""
    failures = str(len(report.failed))
    errors = str(len(report.undecided) + len(report.ungateable))
    tests = str(len(report.results) + len(report.ungateable))
    root = ET.Element("testsuites", name="bench gate", tests=tests, failures=failures, errors=errors)
    suite = ET.SubElement(root, "testsuite", name=_text(f"gates of {report.run_dir.name}"), tests=tests,
                          failures=failures, errors=errors, skipped="0", time="0",
                          timestamp=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
    props = ET.SubElement(suite, "properties")
    for name, value in (("run", report.run_dir), ("baseline", report.baseline or ""),
                        ("strict", str(report.strict).lower())):
        ET.SubElement(props, "property", name=name, value=_text(str(value)))
    for reason in report.ungateable:  # the run cannot be gated at all (exit 6): one error each
        case = ET.SubElement(suite, "testcase", classname="bench.gates.run", name="can be gated", time="0")
        ET.SubElement(case, "error", message=_text(reason), type="ungateable").text = _text(reason)
    for r in report.results:
        _case(suite, r, report.alpha)
    said = [*report.warnings, report.line()]
    ET.SubElement(suite, "system-out").text = _text("\n".join(said))
    ET.indent(root)
    return "<?xml version='1.0' encoding='utf-8'?>\n" + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(report: GateReport, path: str | Path) -> Path:
    """Write ``report``'s JUnit XML to ``path`` atomically (its folder made if needed); return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(junit_xml(report))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _case(suite: ET.Element, r: GateResult, alpha: float) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"bench.gates.{r.gate}", name=_text(r.subject), time="0")
    value = "n/a" if r.value is None else f"{r.value:.4g}"
    ci = "n/a" if r.ci_low is None or r.ci_high is None else f"[{r.ci_low:.4g}, {r.ci_high:.4g}]"
    bound = "none" if math.isnan(r.bound) else f"drop <= {r.bound:g}" if r.gate == "max_drop" else f">= {r.bound:g}"
    p = "" if r.p_holm is None else f", p_holm {r.p_holm:.4g}"
    detail = f"value {value}, {1 - alpha:.0%} CI {ci}{p}, bound {bound}, n {r.n}: {r.reason}"
    if not r.decided:  # cannot decide (exit 6): an error of the check, not a failure of the run
        ET.SubElement(case, "error", message=_text(r.reason), type=r.gate).text = _text(detail)
    elif not r.passed:
        ET.SubElement(case, "failure", message=_text(r.reason), type=r.gate).text = _text(detail)
    ET.SubElement(case, "system-out").text = _text(detail)


def _text(s: str) -> str:
    """Return ``s`` without the control characters XML 1.0 forbids (ElementTree would write them as they are)."""
    return _NOT_XML.sub("\ufffd", s)
