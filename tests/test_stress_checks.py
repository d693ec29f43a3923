"""Judging stress answers: one row per case, so each new pitfall is one new row."""

from __future__ import annotations

import pytest

from evalkit.runs.judge_response import extract_code, extract_count, extract_short, judge
from evalkit.runs.records import RequestRecord


def rec(content: str = "", status: str = "ok", http_status: int | None = 200) -> RequestRecord:
    return RequestRecord(request_id="r", t_sent=0.0, status=status, http_status=http_status, content=content)


@pytest.mark.parametrize(
    "content, expected",
    [
        ("271", "271"),
        ("The answer is 1,098.", "1098"),
        ("310 - 39 = 271", "271"),
        ("-12", "-12"),
        ("no number", None),
        ("KQZX-WMTA-PLRD", None),  # a long request's code delivered to a short never reads as a number
    ],
)
def test_extract_short(content: str, expected: str | None) -> None:
    assert extract_short(content) == expected


@pytest.mark.parametrize(
    "content, expected",
    [
        ("KQZX-WMTA-PLRD", "KQZX-WMTA-PLRD"),
        ("The secret code is KQZX-WMTA-PLRD.", "KQZX-WMTA-PLRD"),
        ("271", None),
        ("I don't know", None),
    ],
)
def test_extract_code(content: str, expected: str | None) -> None:
    assert extract_code(content) == expected


@pytest.mark.parametrize(
    "content, expected",
    [
        ("1, 2, 3", "1, 2, 3"),
        ("1,2,3 lorem ipsum", "1, 2, 3"),
        ("1, 2, 3, 4 filler", "1, 2, 3, 4"),
        ("Sure: 1, 2", None),
    ],
)
def test_extract_count(content: str, expected: str | None) -> None:
    assert extract_count(content) == expected


@pytest.mark.parametrize(
    "record, role, expected, planned_cancel, outcome, kind",
    [
        (rec("271"), "short", "271", False, "correct", None),
        (rec("272"), "short", "271", False, "wrong", None),
        (rec("1, 2, 3 filler filler"), "gen_pair", "1, 2, 3", False, "correct", None),
        (rec("1, 2, 3, 4 filler"), "gen_pair", "1, 2, 3", False, "wrong", None),  # the other stream's longer count
        (rec("1, 2"), "gen_pair", "1, 2, 3", False, "wrong", None),
        (rec("ABCD-EFGH-JKLM"), "long", "ABCD-EFGH-JKLM", False, "correct", None),
        (rec("ABCD-EFGH-JKLN"), "long", "ABCD-EFGH-JKLM", False, "wrong", None),
        (rec(""), "short", "271", False, "error", "empty"),
        (rec("   "), "short", "271", False, "error", "empty"),
        (rec("", "error", 500), "short", "271", False, "error", "http"),
        (rec("12", "error", 200), "short", "12", False, "error", "broken_stream"),
        (rec("", "error", None), "short", "12", False, "error", "broken_stream"),
        (rec("", "timeout", None), "long", "X-Y", False, "error", "timeout"),
        (rec("", "cancelled", 200), "short", "1", False, "error", "cancelled"),
        (rec("", "cancelled", 200), "long", "X-Y", True, "cancelled_as_planned", None),
        (rec("", "error", 500), "long", "X-Y", True, "error", "http"),
    ],
)
def test_judge(
    record: RequestRecord, role: str, expected: str, planned_cancel: bool, outcome: str, kind: str | None
) -> None:
    v = judge(record, role, expected, planned_cancel)
    assert (v.outcome, v.error_kind) == (outcome, kind)


def _gen(first: float, last: float, tokens: int = 100, rate: float | None = None) -> dict:
    return {
        "t_first_token": first,
        "t_last_token": last,
        "completion_tokens": tokens,
        "decode_tok_s": rate if rate is not None else (tokens - 1) / (last - first),
    }


@pytest.mark.parametrize(
    "pair, solo_rate, overlap, speedup",
    [
        # took turns: the second stream starts when the first ends (a clamped max_batch)
        ([_gen(0, 1), _gen(1, 2)], 100, 1.0, 1.0),
        # served together and twice the tokens per second (a memory-bound GPU engine)
        ([_gen(0, 1), _gen(0, 1)], 100, 2.0, 2.0),
        # served together but no faster in total (a compute-bound CPU engine): still two at once
        ([_gen(0, 2), _gen(0, 2)], 100, 2.0, 1.0),
    ],
)
def test_pair_stats_effective_concurrency_is_overlap_and_speedup_is_reported(pair, solo_rate, overlap, speedup):
    from evalkit_stress.metrics import pair_stats

    st = pair_stats(pair, [{"decode_tok_s": solo_rate}])
    assert st["effective_concurrency"] == pytest.approx(overlap)
    assert st["overlap"] == pytest.approx(overlap)
    assert st["speedup"] == pytest.approx(speedup)
