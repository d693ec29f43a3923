"""`evalkit bench` against a real llama-server: its client-timed tok/s agrees with llama.cpp's own timings."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit

pytestmark = pytest.mark.realserver

MAX_TOKENS = 256  # ~4 s a request for SmolLM2 on 2 cores; long enough that one token of skew is < 0.5%


def test_bench_tok_s_agrees_with_llama_cpp_timings(llama_server, tmp_path: Path) -> None:
    """Per prompt, the median evalkit decode tok/s is within 5% of the median `timings.predicted_per_second`."""
    srv = llama_server(parallel=2, ctx=8192)
    proc = run_evalkit(
        [
            "bench",
            "--base-url",
            srv.base_url,
            "--runs",
            "2",
            "--max-tokens",
            str(MAX_TOKENS),
            "--concurrency",
            "2",
            "--out",
            str(tmp_path),
            "--name",
            "bench-llamacpp",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    run = run_dir_from(proc)
    summary = json.loads((run / "summary.json").read_text())
    lines = read_jsonl(run / "requests.jsonl")
    assert lines and all(x["status"] == "ok" for x in lines), [x.get("error") for x in lines]
    assert all(x["usage_source"] == "server" and x["server_timings"] for x in lines)
    assert not summary["stopped_early"], summary["stopped_early"]  # llama.cpp honours ignore_eos
    # ... and the preflight saw it: SmolLM2 ends "Reply with just: OK" early on its own, ignore_eos ran it on.
    assert summary["length_forced"] is True, summary.get("length_mode")

    print("\n[realserver] bench: prompt, evalkit tok/s, llama.cpp predicted_per_second, difference")
    for name, entry in summary["prompts"].items():
        server = statistics.median(
            x["server_timings"]["predicted_per_second"]
            for x in lines
            if x.get("phase") == "single" and x.get("prompt") == name
        )
        ours = entry["tok_s"]
        diff = ours / server - 1
        print(
            f"[realserver]   {name:6s} {ours:7.2f} {server:7.2f} {diff:+.2%}  "
            f"(request tok/s {entry['request_tok_s']:.2f})"
        )
        assert abs(diff) <= 0.05, (name, ours, server)
        assert all(n == MAX_TOKENS for n in entry["completion_tokens"])

    conc = summary["concurrent"]
    streams = [x for x in lines if x.get("phase") == "concurrent"]
    server_sum = statistics.median(
        sum(x["server_timings"]["predicted_per_second"] for x in streams if x["run"] == r)
        for r in {x["run"] for x in streams}
    )
    print(
        f"[realserver]   2 streams: evalkit combined {conc['combined_tok_s']:.2f} tok/s, per stream "
        f"{conc['per_stream_tok_s']}, llama.cpp sum of per-stream rates {server_sum:.2f}"
    )
    # Both streams decode in one batch for nearly their whole length, so the sum of the server's per-stream
    # rates is the combined rate; the streams start a prefill apart, hence the looser bound.
    assert abs(conc["combined_tok_s"] / server_sum - 1) <= 0.10
