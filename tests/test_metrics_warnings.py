"""A missed /metrics scrape is a count in the summary, not a message; a server that never answers, or one whose
scrapes mostly fail, gets one warning."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import evalkit.evidence.server_metrics as sm
from evalkit.clock import Clock


def _record(outcomes: list[bool], monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], dict[str, Any]]:
    seq = iter(outcomes)

    async def fake_scrape(session: Any, url: str, clock: Clock, label: str) -> sm.Scrape:
        ok = next(seq)
        return sm.Scrape(
            clock.now(),
            label,
            ok,
            None if ok else "GET /metrics: TimeoutError: ",
            {"vllm:num_requests_running": 0.0} if ok else {},
        )

    monkeypatch.setattr(sm, "scrape", fake_scrape)
    warnings: list[str] = []
    lines: list[dict[str, Any]] = []

    async def go() -> None:
        rec = sm.MetricsRecorder(
            "http://127.0.0.1:9/v1", Clock(), lambda _f, ln: lines.append(ln), warn=warnings.append
        )
        for i, _ in enumerate(outcomes):
            await rec.snapshot("before" if i == 0 else "after" if i == len(outcomes) - 1 else "sample")
        await rec.close()

    asyncio.run(go())
    return warnings, sm.summarize_metrics(lines)


@pytest.mark.parametrize(
    "outcomes,warned,text",
    [
        ([True] * 40 + [False] + [True] * 33, False, None),  # the H200 run: 1 timeout in 74
        ([False] * 5, True, "unavailable"),  # no /metrics at all
        ([True, True] + [False] * 5, True, "most /metrics scrapes failed"),
    ],
)
def test_missed_scrapes_are_counted_and_warned_only_when_most_fail(
    outcomes: list[bool], warned: bool, text: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    warnings, summary = _record(outcomes, monkeypatch)
    assert (len(warnings) == 1) is warned and len(warnings) <= 1, warnings
    if text:
        assert text in warnings[0]
    assert summary["failed"] == outcomes.count(False) and summary["ok"] == outcomes.count(True)
