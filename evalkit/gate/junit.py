"""JUnit XML for gate results, so CI systems show each rule as one test case."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from evalkit.gate import RuleResult


def write_junit(results: list[RuleResult], path: Path, suite: str = "evalkit.gate") -> None:
    """Write one `<testsuite>` with a `<testcase>` per rule and a `<failure>` for each rule that did not hold."""
    failures = sum(not r.passed for r in results)
    root = ET.Element("testsuites", name=suite, tests=str(len(results)), failures=str(failures))
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(results)), failures=str(failures), errors="0")
    for r in results:
        tc = ET.SubElement(ts, "testcase", classname=f"{suite}.{r.rule.metric.split('.')[0]}", name=r.rule.describe())
        msg = f"value {r.value:.6g}, limit {r.rule.op} {r.limit:.6g}"
        if r.baseline is not None:
            msg += f" (baseline {r.baseline:.6g})"
        if r.passed:
            ET.SubElement(tc, "system-out").text = msg
        else:
            ET.SubElement(tc, "failure", message=msg, type="GateRuleFailed").text = msg
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
