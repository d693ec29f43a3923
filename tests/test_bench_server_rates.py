"""The server's own decode rates in the bench summary: per prompt and for streams together (batched or in turns)."""

from __future__ import annotations

import pytest

from evalkit.bench import server_combined_rate, server_rate


def _line(last: float, n: int, ms: float) -> dict:
    return {
        "t_last_token": last,
        "server_timings": {"predicted_n": n, "predicted_ms": ms, "predicted_per_second": n / ms * 1000},
    }


@pytest.mark.parametrize(
    "group, expected",
    [
        # Two streams decoded in one batch: about the sum of their rates.
        ([_line(10.0, 500, 4000), _line(10.1, 500, 4000)], 1000 / 4.1),
        # Two streams that took turns on one slot: the rate of one.
        ([_line(5.0, 500, 2500), _line(7.6, 500, 2500)], 1000 / 5.0),
        # One window inside the other.
        ([_line(10.0, 100, 1000), _line(10.0, 400, 4000)], 500 / 4.0),
    ],
)
def test_server_combined_rate_is_tokens_over_the_union_of_server_windows(group, expected) -> None:
    assert server_combined_rate(group) == pytest.approx(expected)


def test_no_timings_means_no_server_figures() -> None:
    plain = [{"t_last_token": 1.0}, {"t_last_token": 2.0, "server_timings": {}}]
    assert server_combined_rate(plain) is None
    assert server_rate(plain) is None
    assert server_rate([_line(1.0, 100, 500), _line(2.0, 100, 1000), _line(3.0, 100, 250)]) == pytest.approx(200)
