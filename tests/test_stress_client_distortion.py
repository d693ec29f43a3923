"""The stress client's self-check (stress/client_distortion.py): what a busy client can bend, and what it cannot."""

from __future__ import annotations

from typing import Any

from evalkit_stress.client_distortion import client_health
from evalkit_stress.metrics import StressMetrics

# the smallest latency p50: 10% of it, 200 ms, is the limit
METRICS: StressMetrics = {"short_insert_ttft_s": {"p50": 2.0}}


def _line(t: float, **extra: Any) -> dict[str, Any]:
    """A request planned at `t`, sent 2 ms late, with receive stamps (read lag) and, by default, a first token
    read on its own (stamp bound 0)."""
    base = {"t_planned": t, "t_sent": t + 0.002, "read_lag_s": 0.001, "first_token_stamp_bound_s": 0.0}
    return {**base, **extra}


def test_a_long_loop_lag_that_delayed_nothing_is_reported_not_judged() -> None:
    lines = [_line(float(t)) for t in range(10)]
    health = client_health(lines, [{"lag_p95_s": 0.001, "lag_max_s": 0.674}], METRICS)
    assert health["loop_lag_max_s"] == 0.674 and health["loop_lag_judged"] is False
    assert health["distorted"] is False, health["distortion_reasons"]


def test_without_stamp_bounds_the_lag_itself_is_judged() -> None:
    lines = [{k: v for k, v in _line(float(t)).items() if k != "first_token_stamp_bound_s"} for t in range(10)]
    health = client_health(lines, [{"lag_p95_s": 0.001, "lag_max_s": 0.674}], METRICS)
    assert health["loop_lag_judged"] is True and health["distorted"] is True
    assert health["distortion_reasons"] == [
        "event-loop lag max 674.0 ms exceeds 10% of the smallest latency metric's p50 (2000.0 ms)"
    ]


def test_a_late_cancel_a_late_send_and_a_late_stamp_each_distort() -> None:
    lag = [{"lag_p95_s": 0.001, "lag_max_s": 0.3}]
    late_cancel = [_line(0.0), _line(1.0, t_cancel_planned=1.5, cancel_lateness_s=0.25)]
    health = client_health(late_cancel, lag, METRICS)
    assert health["cancel_lateness_s"]["max"] == 0.25 and health["distortion_reasons"] == [
        "a cancel went out 250.0 ms late, which exceeds 10% of the smallest latency metric's p50 (2000.0 ms)"
    ]
    late_sends = [_line(float(t), t_sent=t + 0.3) for t in range(10)]
    assert client_health(late_sends, lag, METRICS)["distortion_reasons"][0].startswith("send lateness p95 300.0 ms")
    merged = [_line(float(t), first_token_stamp_bound_s=0.3) for t in range(10)]
    assert client_health(merged, lag, METRICS)["distortion_reasons"][0].startswith(
        "first-token stamps may lie 300.0 ms late (p99)"
    )
    on_time = [_line(0.0), _line(1.0, t_cancel_planned=1.5, cancel_lateness_s=0.004)]
    assert client_health(on_time, lag, METRICS)["distorted"] is False
