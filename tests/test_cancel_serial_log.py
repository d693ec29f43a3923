"""The cancel verdict from a one-at-a-time server's own log (llama-cpp-python: `Llama.generate: N prefix-match hit,
remaining M prompt tokens to eval` as it starts each request): the next request's start says whether the cancelled
prefill ran on. Lines in the shape the stress runner writes, log lines as llama-cpp-python 0.3.36 printed them."""

from __future__ import annotations

from typing import Any

from evalkit.evidence.server_evidence import ServerEvidence, parse_log_line
from evalkit_stress.diagnose import diagnose
from evalkit_stress.verdicts import CANT, NO, YES

PROMPT = 3000


def _lines(cancel_at: float) -> list[dict[str, Any]]:
    """A long prompt alone (30 s of prefill), then one cancelled `cancel_at` s in and the short sent after it."""
    base = {"status": "ok", "cycle": 1, "server_timings": None, "prompt_tokens": None}
    long_alone = {
        **base,
        "request_id": "a",
        "scenario": "long_alone",
        "role": "long",
        "t_sent": 0.0,
        "t_first_token": 30.0,
        "t_done": 30.5,
        "ttft_s": 30.0,
        "planned_prompt_tokens": PROMPT,
    }
    cancelled = {
        **base,
        "request_id": "c",
        "scenario": "cancel_then_short",
        "role": "long",
        "status": "cancelled",
        "t_sent": 40.0,
        "t_first_token": None,
        "t_done": 40.0 + cancel_at,
        "ttft_s": None,
        "planned_prompt_tokens": PROMPT,
    }
    short = {
        **base,
        "request_id": "n",
        "scenario": "cancel_then_short",
        "role": "short",
        "t_sent": 40.1 + cancel_at,
        "t_first_token": None,
        "t_done": None,
        "ttft_s": None,
    }
    return [long_alone, cancelled, short]


def _evidence(next_start: float) -> ServerEvidence:
    raw = [
        (0.01, "Llama.generate: 24 prefix-match hit, remaining 3000 prompt tokens to eval"),
        (40.01, "Llama.generate: 24 prefix-match hit, remaining 2998 prompt tokens to eval"),
        (40.02 + 1.0, "Disconnected from client (via refresh/close) Address(host='127.0.0.1', port=1)"),
        (next_start, "Llama.generate: 24 prefix-match hit, remaining 8 prompt tokens to eval"),
    ]
    return ServerEvidence(tuple(e for t, line in raw if (e := parse_log_line(t, line)) is not None))


def _finish(lines: list[dict[str, Any]], next_start: float) -> list[dict[str, Any]]:
    short = lines[2]
    short.update(t_first_token=next_start + 0.3, t_done=next_start + 0.5, ttft_s=next_start + 0.3 - short["t_sent"])
    return lines


def test_prefill_that_ran_on_is_a_no_from_the_log() -> None:
    # Cancelled 1 s into a 30 s prefill; the server started the next request 29 s after the cancel.
    d = diagnose({}, _finish(_lines(1.0), 70.05), _evidence(70.05)).to_json()["cancel_aborts"]
    assert d["verdict"] == NO and d["evidence"] == "log" and d["granularity"] == "only at the end", d
    assert abs(d["samples"][0]["figures"]["next_start_after_cancel_s"] - 29.05) < 0.01


def test_a_prefill_that_ran_on_faster_than_alone_is_still_a_no() -> None:
    # The host sped up: the cancelled prefill ended 20 s after the cancel where the prompt alone predicted 29 s (seen
    # in CI: 0.798 of the prefill left). The next start is still the cancelled prefill running to its end.
    d = diagnose({}, _finish(_lines(1.0), 61.05), _evidence(61.05)).to_json()["cancel_aborts"]
    assert d["verdict"] == NO and d["evidence"] == "log", d


def test_a_start_between_the_bounds_is_left_to_other_evidence() -> None:
    # 0.55 of the prefill left: neither an abort (under half) nor clearly a prefill that ran on.
    d = diagnose({}, _finish(_lines(1.0), 41.05 + 0.55 * 29), _evidence(41.05 + 0.55 * 29)).to_json()["cancel_aborts"]
    assert d["verdict"] == CANT, d


def test_prefill_stopped_at_the_cancel_is_a_yes_from_the_log() -> None:
    d = diagnose({}, _finish(_lines(1.0), 41.15), _evidence(41.15)).to_json()["cancel_aborts"]
    assert d["verdict"] == YES and d["evidence"] == "log", d


def test_without_the_log_the_client_alone_cannot_tell() -> None:
    # The same wait read by the client alone: a prefill that ran on, or other work before the next request?
    d = diagnose({}, _finish(_lines(1.0), 70.05), ServerEvidence()).to_json()["cancel_aborts"]
    assert d["verdict"] == CANT and d["evidence"] == "client" and d["would_tell"], d


def test_a_late_cancel_of_a_prefill_faster_than_alone_is_never_a_yes() -> None:
    # Cancelled 20 s into a prompt whose prefill alone took 30 s; on a loaded host the same prefill ran at 0.8x its
    # time alone and ended 24 s after it began, so the server started the next request 4 s after the cancel: under
    # half the 10 s "left", which read "yes" before. The log shows the server on the cancelled request for 80% of
    # its prefill alone: an abort or a prefill that ran to its end faster, the log cannot tell.
    next_start = 40.01 + 24.0
    d = diagnose({}, _finish(_lines(20.0), next_start), _evidence(next_start)).to_json()["cancel_aborts"]
    assert d["verdict"] == CANT and d["evidence"] == "log", d
    figures = d["samples"][0]["figures"]
    assert abs(figures["served_s"] - 24.0) < 0.01 and figures["prefill_alone_s"] == 30.0, figures
    assert "can't" not in d["why"] and "faster than alone" in d["why"], d
