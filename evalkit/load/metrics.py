"""A load point's figures from its measured request lines: latency percentiles, goodput, rates, client honesty.

Computed from `requests.jsonl` alone, so an old run's summary can be recomputed. TTFT and end-to-end times run
from the request's actual send; how late the client sent it against the plan is `send_lateness_s` beside them.
A point is invalid (its latencies describe the client, not the server) when the client fell behind: open loop,
an achieved rate more than 2% off the scheduled one or sends late by more than a quarter of the mean gap (at
least 10 ms) at p95; closed loop, streams that sat idle between an answer and their next send more than 10% of
the time (so the server saw less than the concurrency asked for).
"""

from __future__ import annotations

from collections.abc import Iterable

from evalkit.load.precision import intervals
from evalkit.load.records import Dist, LoadLine, SloCheck
from evalkit.load.slo import OPS, Target, itl_gaps_ms, request_meets
from evalkit.load.summary_records import PointMetrics, PointVerdict
from evalkit.stats import median, percentile

RATE_TOLERANCE = 0.02
LATE_FLOOR_S = 0.010
IDLE_TOLERANCE = 0.10


QUANTILES = (50, 90, 95, 99)  # a load point's distributions: p50, p90, p95, p99, max, n


def dist(values: Iterable[float | None]) -> Dist:
    """`{"p50", "p90", "p95", "p99", "max", "n", "ci95"}` of raw samples, as floats (as evalkit.stats.distribution);
    `ci95` holds each percentile's distribution-free 95% interval (evalkit/load/precision.py), None where the
    samples are too few to bound it."""
    xs = [float(v) for v in values if v is not None]
    return {
        "p50": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "p95": percentile(xs, 95),
        "p99": percentile(xs, 99),
        "max": max(xs) if xs else None,
        "n": len(xs),
        "ci95": intervals(QUANTILES, xs),
    }


def _rate(times: list[float]) -> float | None:
    times = sorted(times)
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return (len(times) - 1) / (times[-1] - times[0])


def point_metrics(lines: list[LoadLine], mode: str, load: float, targets: list[Target]) -> PointMetrics:
    """The figures of one repeat of one load point from its measured lines."""
    ok = [r for r in lines if r.get("outcome") in ("correct", "wrong")]
    errors = sum(1 for r in lines if r.get("outcome") == "error")
    wrong = sum(1 for r in lines if r.get("outcome") == "wrong")
    sent = [t for r in lines if isinstance(t := r.get("t_sent"), (int, float))]
    done = [t for r in lines if isinstance(t := r.get("t_done"), (int, float))]
    window = (max(done) - min(sent)) if sent and done else None
    good = sum(1 for r in lines if request_meets(r, targets))
    e2e = [r.get("e2e_s") for r in ok]
    m: PointMetrics = {
        "requests": len(lines),
        "errors": errors,
        "wrong_answers": wrong,
        "error_rate": errors / len(lines) if lines else None,
        "ttft_s": dist(r.get("ttft_s") for r in ok),
        # Time to the first answer token, after reasoning; equal to ttft_s when the server does not reason.
        "ttft_answer_s": dist(r.get("ttft_answer_s") for r in ok),
        "reasoning_tokens": dist(r.get("reasoning_tokens") for r in ok),
        "answer_tokens": dist(r.get("answer_tokens") for r in ok),
        "itl_ms": dist(g for r in ok for g in itl_gaps_ms(r)),
        "e2e_s": dist(e2e),
        "send_lateness_s": dist(r.get("send_lateness_s") for r in lines),
        **({"cap_wait_s": dist(r.get("cap_wait_s") for r in lines)} if any("cap_wait_s" in r for r in lines) else {}),
        "window_s": window,
        "throughput_rps": len([r for r in ok if r.get("outcome") == "correct"]) / window if window else None,
        "goodput_rps": good / window if window else None,
        "good_requests": good,
        "prompt_tokens": dist(r.get("prompt_tokens") for r in ok),
        "completion_tokens": dist(r.get("completion_tokens") for r in ok),
    }
    reasons: list[str] = []
    late95 = m["send_lateness_s"]["p95"]
    if mode == "rate":
        scheduled = _rate([s for r in lines if (s := r.get("scheduled_send")) is not None])
        achieved = _rate(sent)
        m["requested_rate"], m["scheduled_rate"], m["achieved_rate"] = load, scheduled, achieved
        # A capped point holds sends back on purpose: its achieved rate is not the client falling behind.
        capped = any(r.get("cap_wait_s") for r in lines)
        if scheduled and achieved and not capped and abs(achieved / scheduled - 1) > RATE_TOLERANCE:
            reasons.append(
                f"achieved {achieved:.3f}/s is {(achieved / scheduled - 1) * 100:+.1f}% off the "
                f"scheduled {scheduled:.3f}/s"
            )
        allowed = max(LATE_FLOOR_S, 0.25 / load)
        if late95 is not None and late95 > allowed:
            reasons.append(f"sends late by {late95 * 1000:.1f} ms at p95 (allowed {allowed * 1000:.1f} ms)")
    else:
        m["concurrency"] = int(load)
        # Little's law: the mean number of requests in flight over the window.
        m["achieved_concurrency"] = sum(v for v in e2e if v is not None) / window if window else None
        busy = sum(v for v in e2e if v is not None)
        idle = sum(max(0.0, r.get("send_lateness_s") or 0.0) for r in ok)
        idle_fraction = m["stream_idle_fraction"] = idle / (busy + idle) if busy + idle > 0 else None
        if idle_fraction is not None and idle_fraction > IDLE_TOLERANCE:
            reasons.append(
                f"streams sat idle {idle_fraction * 100:.1f}% of the time between an answer "
                f"and the next send (allowed {IDLE_TOLERANCE * 100:.0f}%)"
            )
    m["valid"] = not reasons
    m["invalid_reasons"] = reasons
    return m


def judge_point(repeats: list[PointMetrics], targets: list[Target]) -> PointVerdict:
    """A point over its repeats: each target's median over repeats, met or not, and the point's verdict."""
    checks: list[SloCheck] = []
    for t in targets:
        vals = [t.value(r) for r in repeats]
        known = [v for v in vals if v is not None]
        med = median(known) if len(known) == len(vals) and known else None
        checks.append(
            {**t.to_json(), "values": vals, "median": med, "met": med is not None and OPS[t.op](med, t.limit)}
        )
    valid = all(r["valid"] for r in repeats)
    # A point where every request of a repeat failed meets nothing, with targets or without (issue #56: it read
    # "meets yes" with none).
    served = all(r.get("requests", 0) > r.get("errors", 0) for r in repeats)
    return {"checks": checks, "valid": valid, "meets_slo": valid and served and all(c["met"] for c in checks)}
