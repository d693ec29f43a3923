"""Release gate rules (CONTRACT.md "Gate rules"): load a TOML file, check each rule against run summaries."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.config.profiles import read_toml
from evalkit.errors import UsageError
from evalkit.gate.rules_file import GateRules
from evalkit.runs.schemas import validate
from evalkit.runs.summaries import FinishedRun, lookup

OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
LIMIT_KEYS = ("value", "relative", "offset")
KNOWN_KEYS = {"metric", "op", "name", "description", *LIMIT_KEYS}


@dataclass(frozen=True)
class Rule:
    """One `[[rule]]`: a metric, a comparison and exactly one way to set the limit."""

    metric: str
    op: str
    limit_kind: str  # value | relative | offset
    amount: float
    name: str

    def describe(self) -> str:
        """The rule as a person reads it: `bench.prompts.code.tok_s >= 0.97 x baseline`."""
        if self.limit_kind == "value":
            rhs = f"{self.amount:g}"
        elif self.limit_kind == "relative":
            rhs = f"{self.amount:g} x baseline"
        else:
            rhs = f"baseline {'+' if self.amount >= 0 else '-'} {abs(self.amount):g}"
        return f"{self.metric} {self.op} {rhs}"


@dataclass(frozen=True)
class RuleResult:
    """A rule checked: the value found, the limit it was held to, and whether it held."""

    rule: Rule
    value: float
    limit: float
    baseline: float | None
    passed: bool
    decided: bool = True  # False: the value missed its limit, but the data cannot tell it from noise (exit 3)
    why: str | None = None  # how a missed limit was weighed (evalkit.gate.noise)

    @property
    def failed(self) -> bool:
        """Missed its limit, and the shortfall is decided (beyond noise, or a figure held as written)."""
        return not self.passed and self.decided

    @property
    def verdict(self) -> str:
        """pass, FAIL or can't tell."""
        return "pass" if self.passed else "FAIL" if self.decided else "can't tell"


def parse_rules(data: dict[str, Any], source: str) -> list[Rule]:
    """Rules from parsed TOML; every malformed rule is a usage error naming its position."""
    raw = data.get("rule")
    unknown_top = sorted(set(data) - {"rule"})
    if unknown_top:
        raise UsageError(
            f"{source}: unknown top-level key(s): {', '.join(unknown_top)} (a rules file holds [[rule]] tables)"
        )
    if not isinstance(raw, list) or not raw:
        raise UsageError(f"{source}: no [[rule]] tables")
    rules = []
    for i, r in enumerate(raw, 1):
        where = f"{source}: rule {i}"
        if not isinstance(r, dict):
            raise UsageError(f"{where} is not a table")
        unknown = set(r) - KNOWN_KEYS
        if unknown:
            raise UsageError(f"{where} has unknown key(s): {', '.join(sorted(unknown))}")
        metric, op = r.get("metric"), r.get("op")
        if not isinstance(metric, str) or "." not in metric:
            raise UsageError(f"{where}: metric must be '<kind>.<path>'")
        if op not in OPS:
            raise UsageError(f"{where}: op must be one of {' '.join(OPS)}")
        limits = [k for k in LIMIT_KEYS if k in r]
        if len(limits) != 1:
            raise UsageError(f"{where}: give exactly one of value, relative, offset")
        amount = r[limits[0]]
        if isinstance(amount, bool) and limits[0] == "value":
            # a yes/no of the summary (`stress.until_sure.decided = true`), read as 1 or 0
            if op not in ("==", "!="):
                raise UsageError(f"{where}: value true or false compares only with op == or !=")
            amount = float(amount)
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            raise UsageError(f"{where}: {limits[0]} must be a number")
        rules.append(Rule(metric, op, limits[0], float(amount), str(r.get("name") or metric)))
    validate(GateRules, data, source)  # what the checks above do not name: nan/inf limits, a relative of 0 or less
    return rules


def load_rules(path: Path) -> list[Rule]:
    """Rules from a TOML file."""
    return parse_rules(read_toml(path), str(path))


def check(rules: list[Rule], runs: dict[str, FinishedRun], baseline: dict[str, FinishedRun] | None) -> list[RuleResult]:
    """Check every rule; a value missing from the runs or the baseline is a usage error (never a pass)."""
    results = []
    for rule in rules:
        value = lookup(rule.metric, runs)
        if value is None:
            raise UsageError(f"rule {rule.name!r}: {rule.metric} not found in the runs given")
        base = None
        if rule.limit_kind == "value":
            limit = rule.amount
        else:
            if not baseline:
                raise UsageError(f"rule {rule.name!r} is {rule.limit_kind} to a baseline; pass --baseline RUN_DIR")
            base = lookup(rule.metric, baseline)
            if base is None:
                raise UsageError(f"rule {rule.name!r}: {rule.metric} not found in the baseline runs")
            limit = rule.amount * base if rule.limit_kind == "relative" else base + rule.amount
        results.append(RuleResult(rule, value, limit, base, OPS[rule.op](value, limit)))
    return weigh_shortfalls(results, runs, baseline)


def weigh_shortfalls(
    results: list[RuleResult], runs: dict[str, FinishedRun], baseline: dict[str, FinishedRun] | None
) -> list[RuleResult]:
    """Each relative or offset rule that missed its limit, weighed by the one comparison rule (evalkit.gate.noise):
    a failure only when the shortfall is beyond noise, else not decided."""
    from evalkit.gate.noise import judge

    rows = [
        (r.rule.name, r.rule.metric, r.rule.op, r.rule.limit_kind, r.rule.amount)
        for r in results
        if not r.passed and r.rule.limit_kind != "value" and r.rule.op in (">", ">=", "<", "<=")
    ]
    if not rows or not baseline:
        return results
    judged = judge(rows, runs, baseline)
    out = []
    for r in results:
        j = judged.get(r.rule.name) if not r.passed else None
        out.append(r if j is None else RuleResult(r.rule, r.value, r.limit, r.baseline, False, j.decided, j.why))
    return out


def exit_code(results: list[RuleResult]) -> int:
    """0 every rule holds, 1 one failed, 3 none failed but one could not be decided (its shortfall within noise, or
    the measuring machine changed between the runs)."""
    if any(r.failed for r in results):
        return 1
    return 0 if all(r.passed for r in results) else 3


def format_table(results: list[RuleResult]) -> str:
    """A markdown table of rule, value, limit and verdict."""
    lines = ["| rule | value | limit | verdict |", "| --- | ---: | ---: | --- |"]
    for r in results:
        why = f" ({r.why})" if r.why and not r.passed else ""
        lines.append(f"| `{r.rule.describe()}` | {r.value:.6g} | {r.limit:.6g} | {r.verdict}{why} |")
    failed = sum(r.failed for r in results)
    open_ = sum(not r.passed and not r.decided for r in results)
    passed = len(results) - failed - open_
    lines.append("")
    lines.append(f"{passed} passed, {failed} failed" + (f", {open_} not decided" if open_ else ""))
    return "\n".join(lines)
