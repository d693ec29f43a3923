"""JUnit XML for gate results, so CI systems show each rule as one test case."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from evalkit.gate import RuleResult


def _suite(root: ET.Element, suite: str, results: list[RuleResult]) -> None:
    failures = sum(r.failed for r in results)
    skipped = sum(not r.passed and not r.decided for r in results)
    ts = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    for r in results:
        tc = ET.SubElement(ts, "testcase", classname=f"{suite}.{r.rule.metric.split('.')[0]}", name=r.rule.describe())
        msg = f"value {r.value:.6g}, limit {r.rule.op} {r.limit:.6g}"
        if r.baseline is not None:
            msg += f" (baseline {r.baseline:.6g})"
        if r.passed:
            ET.SubElement(tc, "system-out").text = msg
        elif not r.decided:  # not decided: neither a pass nor a failure (gate exit 3)
            ET.SubElement(tc, "skipped", message=f"{msg}; {r.why}")
        else:
            ET.SubElement(tc, "failure", message=msg, type="GateRuleFailed").text = msg


def write_junit_suites(suites: dict[str, list[RuleResult]], path: Path, name: str = "evalkit.gate") -> None:
    """Write one `<testsuite>` per entry (e.g. per sweep point), a `<testcase>` per rule in each."""
    tests = sum(len(rs) for rs in suites.values())
    failures = sum(r.failed for rs in suites.values() for r in rs)
    root = ET.Element("testsuites", name=name, tests=str(tests), failures=str(failures))
    for suite, results in suites.items():
        _suite(root, suite, results)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def write_junit(results: list[RuleResult], path: Path, suite: str = "evalkit.gate") -> None:
    """Write one `<testsuite>` with a `<testcase>` per rule and a `<failure>` for each rule that did not hold."""
    write_junit_suites({suite: results}, path, suite)
