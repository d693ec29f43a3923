"""A relative or offset gate rule against a baseline, decided by the one comparison rule (evalkit.comparison).

A rule whose value meets its limit passes. One that misses it fails only when the shortfall is beyond noise: the
run's raw samples of the figure (bench runs, stress requests) against the baseline's moved to the limit (times
`relative`, plus `offset`) by the rank test, the gate's sampled rules one Holm family at 5%. When the data cannot
tell (too few samples, a shortfall within noise) or the two runs' measuring machines differ (a distorted client, a
calibration probe apart: evalkit.runs.machine_probe) the rule is **not decided**: `evalkit gate` exits 3, never 1,
for it. A figure with no raw samples (a count, a score) is held to its limit as written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from evalkit import comparison
from evalkit.runs.machine_probe import machine_changed
from evalkit.runs.summaries import FinishedRun


@dataclass(frozen=True)
class Shortfall:
    """How a rule that missed its limit was judged: decided (a failure beyond noise) or not, and why."""

    decided: bool
    why: str
    level: float | None = None


def _bench_samples(run: FinishedRun, path: list[str]) -> list[float] | None:
    s = run.summary
    if len(path) == 3 and path[0] == "prompts" and path[2] in ("tok_s", "request_tok_s"):
        entry = (s.get("prompts") or {}).get(path[1]) or {}
        xs = entry.get("runs" if path[2] == "tok_s" else "request_runs")
    elif path == ["concurrent", "combined_tok_s"]:
        xs = (s.get("concurrent") or {}).get("runs")
    else:
        return None
    return [float(x) for x in xs if isinstance(x, (int, float))] if isinstance(xs, list) else None


def _stress_samples(run: FinishedRun, path: list[str]) -> list[float] | None:
    if len(path) != 3 or path[0] != "metrics":
        return None
    from evalkit_stress.metrics import cycle_values

    lines = [r.model_dump() for r in run.request_records]
    return cycle_values(lines, path[1]) or None


SAMPLES: dict[str, Callable[[FinishedRun, list[str]], list[float] | None]] = {
    "bench": _bench_samples,
    "stress": _stress_samples,
}


def samples(metric: str, runs: dict[str, FinishedRun]) -> list[float] | None:
    """The raw samples behind a gate metric (`bench.prompts.code.tok_s`: its runs' rates; `stress.metrics.X.p95`:
    X's values a cycle), or None when the figure has none."""
    kind, _, rest = metric.partition(".")
    read = SAMPLES.get(kind)
    if read is None or kind not in runs:
        return None
    return read(runs[kind], rest.split("."))


def machine_why(metric: str, runs: dict[str, FinishedRun], baseline: dict[str, FinishedRun]) -> str | None:
    """Why the run and the baseline of this metric's kind were not measured on the same machine state, or None."""
    kind = metric.partition(".")[0]
    a, b = baseline.get(kind), runs.get(kind)
    if a is None or b is None:
        return None
    for who, r in (("the baseline's", a), ("the run's", b)):
        client: Any = r.summary.get("client")
        if isinstance(client, dict) and client.get("distorted"):
            return f"{who} client distorted it"
    return machine_changed(a.manifest, b.manifest)


class _ScoreEntry(TypedDict):
    sure_correct: int | float
    unsure: int | float


def _score_entry(run: FinishedRun, path: list[str]) -> _ScoreEntry | None:
    node: Any = run.summary
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    found = isinstance(node, dict) and "unsure" in node and "sure_correct" in node
    return cast(_ScoreEntry, node) if found else None


def unsure_why(
    metric: str,
    op: str,
    limit_kind: str,
    amount: float,
    runs: dict[str, FinishedRun],
    baseline: dict[str, FinishedRun],
) -> str | None:
    """Why a capability score that missed its limit can't be told (issue #55): the unsure grades on either side
    could close the gap (the run's score if every unsure line were right meets the limit moved from the baseline's
    score if every unsure line there were wrong), or None when the miss stands whatever the unsure lines are."""
    kind, _, rest = metric.partition(".")
    path = rest.split(".")
    if kind != "capability" or path[-1] not in ("correct", "sure_correct") or op not in (">", ">="):
        return None
    if kind not in runs or kind not in baseline:
        return None
    mine, base = _score_entry(runs[kind], path), _score_entry(baseline[kind], path)
    if mine is None or base is None or not (mine["unsure"] or base["unsure"]):
        return None
    best, base_low = mine["sure_correct"] + mine["unsure"], base["sure_correct"]
    limit = base_low * amount if limit_kind == "relative" else base_low + amount
    if not (best > limit if op == ">" else best >= limit):
        return None
    return (
        f"{mine['unsure']} unsure line(s) in the run and {base['unsure']} in the baseline could close the gap "
        f"(the run at most {best}, the limit from the baseline's sure grades {limit:g})"
    )


def judge(
    rows: list[tuple[str, str, str, str, float]],
    runs: dict[str, FinishedRun],
    baseline: dict[str, FinishedRun],
    level: float = comparison.LEVEL,
) -> dict[str, Shortfall]:
    """Each rule that missed its limit, given as (name, metric, op, limit kind `relative`|`offset`, amount): decided
    when its samples are beyond noise short of the baseline's moved to the limit, the sampled rules one Holm
    family; not decided when the machine changed or the samples cannot tell; decided as written without samples."""
    out: dict[str, Shortfall] = {}
    tested: list[tuple[str, comparison.Comparison, bool]] = []
    for name, metric, op, limit_kind, amount in rows:
        why = machine_why(metric, runs, baseline)
        if why is not None:
            out[name] = Shortfall(False, f"can't tell: {why}")
            continue
        unsure = unsure_why(metric, op, limit_kind, amount, runs, baseline)
        if unsure is not None:
            out[name] = Shortfall(False, f"can't tell: {unsure}")
            continue
        xs, base = samples(metric, runs), samples(metric, baseline)
        if not xs or not base:
            out[name] = Shortfall(True, "no raw samples to weigh: held to the limit as written")
            continue
        moved = [b * amount for b in base] if limit_kind == "relative" else [b + amount for b in base]
        higher = op in (">", ">=")
        tested.append((name, comparison.compare_samples(moved, xs, higher, level, 0.0), higher))
    adjusted = comparison.holm([c for _, c, _ in tested], [h for _, _, h in tested], level, 0.0)
    for (name, _, _), c in zip(tested, adjusted):
        at = f"rank test p={c.p:.2g} at level {c.level:.2g}, n={c.n_before}/{c.n_after}" if c.p is not None else ""
        if c.mark == comparison.WORSE:
            out[name] = Shortfall(True, f"short of the limit beyond noise ({at})", c.level)
        elif c.mark == comparison.UNKNOWN:
            out[name] = Shortfall(False, f"can't tell: {c.why}", c.level)
        else:
            out[name] = Shortfall(False, f"can't tell: short of the limit within noise ({at})", c.level)
    return out
