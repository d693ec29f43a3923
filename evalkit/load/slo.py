"""Latency targets (`--slo ttft_p99_s<=2`): parsing, checking a point's metrics, and checking one request.

Names: `<ttft|ttft_answer|itl|e2e>_<p50|p90|p95|p99|max>_<s|ms>` read the point's latency distribution in that
unit (`ttft_answer`: the first answer token, after any reasoning), and the counts `errors`, `wrong_answers`,
`error_rate`, `goodput_rps`, `throughput_rps` read the point's figure. A request "met its targets" (goodput) when
it finished, answered right and its own TTFT, end-to-end time and inter-token gaps (at the named percentile, in
that request alone) meet every latency target.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from evalkit.errors import UsageError
from evalkit.load.records import LoadLine, SloJson
from evalkit.load.summary_records import PointMetrics
from evalkit.stats import percentile

OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
LATENCY = {
    "ttft": "ttft_s",
    "ttft_answer": "ttft_answer_s",
    "itl": "itl_ms",
    "e2e": "e2e_s",
}  # target name -> metric in summary.json
STATS = ("p50", "p90", "p95", "p99", "max")
SCALARS = ("errors", "wrong_answers", "error_rate", "goodput_rps", "throughput_rps")
_SLO_RE = re.compile(r"\s*([a-z0-9_]+)\s*(<=|>=|==|!=|<|>)\s*([-+0-9.eE]+)\s*")
_LAT_RE = re.compile(r"(ttft_answer|ttft|itl|e2e)_(p50|p90|p95|p99|max)_(s|ms)")


@dataclass(frozen=True)
class Target:
    """One target: a name as written, the summary metric and statistic it reads, a comparison and a limit."""

    text: str
    metric: str  # ttft_s | itl_ms | e2e_s | one of SCALARS
    stat: str | None  # p99 ... for latency metrics
    scale: float  # multiplies the stored value into the target's unit
    op: str
    limit: float

    def value(self, metrics: PointMetrics) -> float | None:
        """The point's figure this target reads (in the target's unit); None when missing."""
        node = metrics.get(self.metric)
        if self.stat is not None:
            node = node.get(self.stat) if isinstance(node, dict) else None
        return float(node) * self.scale if isinstance(node, (int, float)) else None

    def met(self, metrics: PointMetrics) -> bool:
        """Whether the point meets it (a missing figure, such as TTFT with no answered request, does not)."""
        v = self.value(metrics)
        return v is not None and OPS[self.op](v, self.limit)

    def to_json(self) -> SloJson:
        """As summary.json lists it."""
        return {
            "slo": self.text,
            "metric": self.metric,
            "stat": self.stat,
            "op": self.op,
            "limit": self.limit,
            "scale": self.scale,
        }


def parse_target(text: str) -> Target:
    """`ttft_p99_s<=2` -> Target; anything else is a usage error."""
    m = _SLO_RE.fullmatch(text)
    if not m:
        raise UsageError(f"--slo {text!r}: write NAME OP NUMBER, e.g. ttft_p99_s<=2")
    name, op, raw = m.groups()
    try:
        limit = float(raw)
    except ValueError:
        raise UsageError(f"--slo {text!r}: {raw!r} is not a number") from None
    lat = _LAT_RE.fullmatch(name)
    if lat:
        kind, stat, unit = lat.groups()
        metric = LATENCY[kind]
        stored_ms = metric.endswith("_ms")
        scale = 1.0 if (unit == "ms") == stored_ms else (1000.0 if unit == "ms" else 0.001)
        return Target(text.strip(), metric, stat, scale, op, limit)
    if name in SCALARS:
        return Target(text.strip(), name, None, 1.0, op, limit)
    raise UsageError(
        f"--slo {text!r}: unknown target {name!r} (latency: ttft|ttft_answer|itl|e2e _ p50|p90|p95|p99|max "
        f"_ s|ms; counts: {', '.join(SCALARS)})"
    )


def request_meets(line: LoadLine, targets: list[Target]) -> bool:
    """Whether one measured request counts towards goodput (see the module docstring)."""
    if line.get("status") != "ok" or line.get("outcome") != "correct":
        return False
    for t in targets:
        if t.stat is None:
            continue
        if t.metric == "ttft_s":
            v = line.get("ttft_s")
        elif t.metric in ("e2e_s", "ttft_answer_s"):
            v = line.get("ttft_answer_s") if t.metric == "ttft_answer_s" else line.get("e2e_s")
        else:
            gaps = itl_gaps_ms(line)
            v = (max(gaps) if t.stat == "max" else percentile(gaps, float(t.stat[1:]))) if gaps else None
            if v is None:
                continue  # a one-token answer has no gap to judge
        if v is None:
            return False
        if not OPS[t.op](float(v) * t.scale, t.limit):
            return False
    return True


def itl_gaps_ms(line: LoadLine) -> list[float]:
    """A request's inter-token gaps in milliseconds, from its recorded chunk arrival times."""
    times = line.get("chunk_times") or []
    return [(b - a) * 1000.0 for a, b in zip(times, times[1:])]
