"""A first token's stamp bound is the read's own lateness, not the whole wait before the read (issue 39).

Bytes share one kernel stamp only while they wait unread. A first token read together with the next one, by a client
that read them a few ms late, may carry a stamp a few ms late; the seconds of prefill before it (when the client
waited with nothing to read) bound nothing. The demo called stamps "may lie ~2000 ms late" while its reads were 1-8
ms late: the bound was the time since the read before, the whole prefill.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.client import kernel_stamps
from evalkit.client.chat import _EventStream
from evalkit.runs.records import RequestRecord
from evalkit.runs.rundir import read_jsonl
from runfixtures import bench_args


def _event(text: str) -> bytes:
    return f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': text}}]})}\n\n".encode()


def test_a_first_token_merged_after_a_long_wait_is_bounded_by_the_reads_lateness() -> None:
    rec = RequestRecord(request_id="r", t_sent=0.0)
    stream = _EventStream(rec, [], [], None)
    stream.on_head(200, {}, 0.001)
    # 2 s of prefill with nothing to read, then the first two tokens in one read, read 3 ms after the newest came
    stream.on_data(_event("a") + _event("b"), 2.0, 0.003)
    stream.flush()
    assert rec.t_first_token == 2.0
    assert rec.first_token_stamp_bound_s == pytest.approx(0.003)

    alone = RequestRecord(request_id="s", t_sent=0.0)
    stream = _EventStream(alone, [], [], None)
    stream.on_head(200, {}, 0.001)
    stream.on_data(_event("a"), 2.0, 0.5)  # read late, but on its own: its stamp is its own
    stream.on_data(_event("b"), 2.1, 0.0)
    stream.flush()
    assert alone.first_token_stamp_bound_s == 0.0


@pytest.mark.skipif(not kernel_stamps.available(), reason="receive stamps are Linux-only")
def test_bench_after_a_long_prefill_does_not_call_its_stamps_late_by_the_prefill(
    sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Tokens 50 µs apart (the sim sleeps only for 0.5 ms or more, yielding every 2 ms): the first token is written
    # with the next ones and read with them. At 0.5 ms apart it often was, but a loaded run once read none merged.
    s = sim("--time-scale", "20", "--decode-rate", "1000")
    prompts = tmp_path / "long.jsonl"
    prompts.write_text(json.dumps({"name": "long", "prompt": "word " * 6000}) + "\n")
    argv = bench_args(s.base_url, tmp_path, "b", "--runs", "6", "--max-tokens", "64", "--concurrency", "1")
    assert main([*argv, "--prompts", str(prompts)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    lines = [x for x in read_jsonl(tmp_path / "b" / "requests.jsonl") if x.get("bench_key")]
    merged = [x for x in lines if (x.get("first_token_stamp_bound_s") or 0) > 0]
    assert merged, "no first token was read with later bytes: nothing was tested"
    for x in merged:
        # The bound is how late that read came, never more than the request's latest read; the prefill is far more.
        assert x["first_token_stamp_bound_s"] <= x["read_lag_s"] + 1e-9, x
        assert x["first_token_stamp_bound_s"] < x["ttft_s"] / 4, x
    client = json.loads((tmp_path / "b" / "summary.json").read_text())["client"]
    assert client["error_budget_s"] <= client["read_lag_s"]["max"] + 1e-9
