"""stress/exercised.py: which planned situations happened, one row a case (the lines as stress writes them)."""

from __future__ import annotations

from typing import Any

import pytest

from evalkit_stress import exercised as ex
from evalkit_stress.metrics import compute_metrics


def _line(
    rid: str, scenario: str, role: str, sent: float, first: float | None, done: float, status: str = "ok", **extra: Any
) -> dict[str, Any]:
    return {
        "request_id": rid,
        "cycle": 1,
        "round": 1,
        "scenario": scenario,
        "role": role,
        "t_sent": sent,
        "t_first_token": first,
        "t_last_token": done if first is not None else None,
        "t_done": done,
        "ttft_s": None if first is None else first - sent,
        "status": status,
        "completion_tokens": 10,
        "decode_tok_s": 100.0,
        **extra,
    }


CASES = [
    # (lines, {request_id: reason})
    (
        [
            _line("L", "cancel_then_short", "long", 0, 1.0, 1.5, cancel_after_s=2.0, cancel_sent=False),
            _line("S", "cancel_then_short", "short", 1.6, 1.7, 1.8),
        ],
        {"L": ex.CANCEL_NOT_SENT, "S": ex.CANCEL_NOT_SENT},
    ),
    (
        [
            _line(
                "L", "cancel_then_short", "long", 0, None, 0.5, status="cancelled", cancel_after_s=0.5, cancel_sent=True
            ),
            _line("S", "cancel_then_short", "short", 0.6, 0.7, 0.8),
        ],
        {},
    ),
    # An old run without cancel_sent: read from its status.
    (
        [
            _line("L", "cancel_then_short", "long", 0, 1.0, 1.5, cancel_after_s=2.0),
            _line("S", "cancel_then_short", "short", 1.6, 1.7, 1.8),
        ],
        {"L": ex.CANCEL_NOT_SENT, "S": ex.CANCEL_NOT_SENT},
    ),
    (
        [
            _line(
                "L", "cancel_then_short", "long", 0, None, 0.1, status="error", cancel_after_s=2.0, cancel_sent=False
            ),
            _line("S", "cancel_then_short", "short", 0.2, 0.3, 0.4),
        ],
        {"L": ex.LONG_FAILED_BEFORE_CANCEL, "S": ex.LONG_FAILED_BEFORE_CANCEL},
    ),
    ([_line("L", "short_insert", "long", 0, 2.0, 2.5), _line("S", "short_insert", "short", 0.5, 0.6, 0.7)], {}),
    (
        [_line("L", "short_insert", "long", 0, 0.4, 0.6), _line("S", "short_insert", "short", 0.5, 0.6, 0.7)],
        {"S": ex.INSERT_AFTER_PREFILL, "L": ex.NO_INSERT_INSIDE},
    ),
    (
        [
            _line("L", "double_insert", "long", 0, 1.0, 1.5),
            _line("A", "double_insert", "short", 0.5, 0.6, 0.7),
            _line("B", "double_insert", "short", 1.2, 1.3, 1.4),
        ],
        {"B": ex.INSERT_AFTER_PREFILL},
    ),
    (
        [
            _line("L", "short_insert", "long", 0, None, 0.1, status="error"),
            _line("S", "short_insert", "short", 0.5, 0.6, 0.7),
        ],
        {"S": ex.INSERT_LONG_FAILED},
    ),
    (
        [
            _line("P1", "concurrent_gen", "gen_pair", 0, 0.1, 1.0),
            _line("P2", "concurrent_gen", "gen_pair", 0, 0.1, 1.0),
        ],
        {},
    ),
    (
        [
            _line("P1", "concurrent_gen", "gen_pair", 0, 0.1, 0.3),
            _line("P2", "concurrent_gen", "gen_pair", 0.5, 0.6, 0.9),
        ],
        {"P1": ex.PAIR_APART, "P2": ex.PAIR_APART},
    ),
    (
        [
            _line("P1", "concurrent_gen", "gen_pair", 0, 0.1, 1.0),
            _line("P2", "concurrent_gen", "gen_pair", 0, None, 0.05, status="error"),
        ],
        {"P1": ex.PAIR_PARTNER_FAILED},
    ),
]


@pytest.mark.parametrize("lines,expected", CASES)
def test_not_exercised(lines: list[dict[str, Any]], expected: dict[str, str]) -> None:
    assert ex.not_exercised(lines) == expected


def test_metrics_leave_out_what_did_not_happen() -> None:
    lines = CASES[0][0] + [{**x, "request_id": "i" + x["request_id"]} for x in CASES[5][0]]
    metrics = compute_metrics(ex.exercised(lines))
    assert metrics["post_cancel_ttft_s"]["n"] == 0 and metrics["short_insert_ttft_s"]["n"] == 0
    summary = ex.summary(lines)
    assert summary["post_cancel_ttft_s"] == {"count": 1, "reasons": {ex.CANCEL_NOT_SENT: 1}}
    assert summary["short_insert_ttft_s"]["count"] == 1 and summary["long_prefill_with_inserts_s"]["count"] == 1
