"""The server's own decode rates in the bench summary: per prompt and for streams together (batched or in turns)."""

from __future__ import annotations

import pytest

from evalkit.bench.throughput import server_combined_rate, server_rate


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


def test_vllm_metrics_fill_the_server_rate_where_no_timings_come(sim, tmp_path) -> None:
    """Over HTTP: a sim without `timings` (as vLLM) still gets the server's decode rate, from its /metrics windows."""
    import json

    from evalkit.cli import main
    from evalkit.evidence.metrics_rates import SOURCE
    from runfixtures import bench_args

    s = sim("--time-scale", "5", "--no-timings")
    assert main([*bench_args(s.base_url, tmp_path, "b"), "--runs", "2", "--max-tokens", "64"]) == 0
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    events = [e for e in s.events() if not e["request_id"].startswith("preflight-") and e["status"] == "ok"]
    truth = [
        (e["completion_tokens"] - 1) / (e["done"] - e["first_token"]) for e in events if e["completion_tokens"] > 1
    ]
    for name, p in summary["prompts"].items():
        print(f"\n{name}: evalkit {p['tok_s']:.1f} tok/s, server {p['server_tok_s']} ({p.get('server_source')})")
        assert p["server_source"] == SOURCE
        assert min(truth) * 0.9 <= p["server_tok_s"] <= max(truth) * 1.1
        assert abs(p["vs_server"]) < 0.15  # evalkit's client rate against the server's own


@pytest.mark.parametrize("slots", ["2", "1"])
def test_vllm_metrics_fill_the_streams_combined_rate(sim, tmp_path, slots: str) -> None:
    """Two streams against a sim without `timings`: the combined server rate comes from the /metrics window around
    each pair (vLLM's decode-time sum shared by tokens) and agrees with the sim's truth, the tokens over the union
    of the two requests' decode windows, batched (two slots) or in turns (one)."""
    import json

    from evalkit.cli import main
    from evalkit.evidence.metrics_rates import COMBINED_SOURCE
    from runfixtures import bench_args

    s = sim("--time-scale", "5", "--no-timings", "--max-batch", slots)
    argv = [*bench_args(s.base_url, tmp_path, "b"), "--runs", "2", "--max-tokens", "64", "--concurrency", "2"]
    assert main(argv) == 0
    conc = json.loads((tmp_path / "b" / "summary.json").read_text())["concurrent"]
    events = {e["request_id"]: e for e in s.events()}
    lines = [json.loads(x) for x in (tmp_path / "b" / "requests.jsonl").read_text().splitlines()]
    truths = []
    for run in (1, 2):
        pair = [events[x["request_id"]] for x in lines if x.get("phase") == "concurrent" and x.get("run") == run]
        spans = sorted((e["first_token"], e["done"]) for e in pair)
        union = sum(hi - lo for lo, hi in spans) - max(0.0, min(spans[0][1], spans[1][1]) - spans[1][0])
        truths.append((sum(e["completion_tokens"] for e in pair) - 1) / union)
    print(f"\nslots {slots}: server combined {conc['server_combined_tok_s']:.1f} tok/s, truth {truths}")
    assert conc["server_source"] == COMBINED_SOURCE
    assert min(truths) * 0.85 <= conc["server_combined_tok_s"] <= max(truths) * 1.15
    assert abs(conc["vs_server"]) < 0.15
