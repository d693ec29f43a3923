"""A host's clock offset from round trips (evalkit.load.clock_offset): the true offset always lies within the
estimate's uncertainty, however lopsided the delays each way; the intersection of the probes is never wider than
the best probe's own interval; a clock that moved between probes is said so and still covered; request lines move
onto the coordinator's clock by their absolute stamps only."""

from __future__ import annotations

import random

import pytest

from evalkit.load.clock_offset import ClockOffset, ClockProbe, estimate_offset, on_coordinator_clock


def probes(offset: float, n: int, rng: random.Random, start: float = 1000.0) -> list[ClockProbe]:
    """n round trips to a host whose clock reads `offset` ahead, each way's delay drawn apart (0.1-20 ms)."""
    out, t = [], start
    for _ in range(n):
        up, down = rng.uniform(1e-4, 0.02), rng.uniform(1e-4, 0.02)
        out.append(ClockProbe(t, t + up + offset, t + up + down))
        t += up + down + rng.uniform(0, 0.01)
    return out


@pytest.mark.parametrize("offset", [0.0, 0.0123, -2.5, 3600.0])
def test_the_true_offset_lies_within_the_uncertainty(offset: float) -> None:
    rng = random.Random(7)
    for _ in range(500):
        ps = probes(offset, rng.randint(1, 16), rng)
        est = estimate_offset(ps)
        assert est.consistent
        assert abs(est.offset_s - offset) <= est.uncertainty_s + 1e-9
        best = min(ps, key=lambda p: p.round_trip_s)
        assert est.uncertainty_s <= best.round_trip_s / 2 + 1e-12  # never wider than NTP's min-delay sample
        assert est.round_trip_s == best.round_trip_s and est.probes == len(ps)


def test_one_symmetric_probe_is_exact() -> None:
    est = estimate_offset([ClockProbe(10.0, 15.004, 10.008)])
    assert est.offset_s == pytest.approx(5.0) and est.uncertainty_s == pytest.approx(0.004)


def test_a_clock_that_stepped_between_probes_is_said_and_covered() -> None:
    rng = random.Random(3)
    before, after = probes(0.0, 8, rng), probes(0.05, 8, rng, start=1010.0)  # stepped 50 ms between the two
    est = estimate_offset(before + after)
    assert not est.consistent
    assert est.offset_s - est.uncertainty_s <= 0.0 and est.offset_s + est.uncertainty_s >= 0.05


def test_no_probe_is_an_error() -> None:
    with pytest.raises(ValueError):
        estimate_offset([])


def test_a_line_moves_by_its_absolute_stamps_only() -> None:
    line = {
        "request_id": "load-1",
        "t_sent": 100.0,
        "t_first_byte": 100.1,
        "t_first_token": 100.2,
        "t_first_answer_token": None,
        "t_done": 101.0,
        "t_last_token": 100.9,
        "scheduled_send": 99.99,
        "chunk_times": [100.2, 100.5, 100.9],
        "ttft_s": 0.2,
        "e2e_s": 1.0,
        "send_lateness_s": 0.01,
        "index": 1,
    }
    moved = on_coordinator_clock(line, ClockOffset(2.0, 0.001, 0.002, 16))
    assert moved["t_sent"] == pytest.approx(98.0) and moved["t_done"] == pytest.approx(99.0)
    assert moved["scheduled_send"] == pytest.approx(97.99) and moved["t_last_token"] == pytest.approx(98.9)
    assert moved["chunk_times"] == pytest.approx([98.2, 98.5, 98.9])
    assert moved["t_first_answer_token"] is None
    for key in ("ttft_s", "e2e_s", "send_lateness_s", "index", "request_id"):
        assert moved[key] == line[key]
    assert line["t_sent"] == 100.0  # the host's line itself is left as it was
