"""`evalkit stress --cycles 1` against a real vLLM in two scheduler configurations, one server each (one at a time):

- `default`: vLLM 0.32's CPU defaults (chunked prefill on, a 2048-token step budget): a 1800-token prompt is one
  engine step, so a short request sent during it waits for the step to end, and so does a cancel. The servers log
  each engine step (VLLM_LOGGING_LEVEL=DEBUG, evalkit/realserver/vllm_launch.py): the verdicts then rest on vLLM's
  step log (tests/realserver/test_vllm_step_log.py holds ten cycles of it to vLLM's truth).
- `b512-lp256`: `--max-num-batched-tokens 512 --long-prefill-token-threshold 256`: a long prompt is prefilled 256
  tokens a step, a short request gets in between two steps, and a cancel stops it at the next one.

Seed 9 puts the short insert 0.59 s and the cancel 1.1 s after their long prompt is sent: both inside an 1800-token
prefill (~2.5 s on 2 idle cores in float32, far longer on a loaded machine). The cancel's truth comes from vLLM
itself: its log says the abort reached the engine ("Aborted request(s) chatcmpl-<evalkit's id>", with
--enable-log-requests), and the prefix cache says how much of the cancelled prompt the engine computed (sent again
for one token, its hits are exactly the blocks computed before the abort took effect).
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit
from vllm_support import aborted_in_log, cancelled_prompt, computed_prefix_tokens, whole_blocks

pytestmark = pytest.mark.realserver

SEED = 9
LONG_TOKENS = 1800  # one step under the default 2048-token budget
GEN_TOKENS = 64
SERVERS: dict[str, dict[str, Any]] = {
    "default": {},
    "b512-lp256": {"max_num_batched_tokens": 512, "long_prefill_token_threshold": 256},
}


class StressResult:
    """One stress run's summary, request lines and vLLM's log, and the cancel's truth from vLLM itself."""

    def __init__(self, summary: dict[str, Any], lines: list[dict[str, Any]], log: str, computed: int, prompt: int):
        self.summary, self.lines, self.log = summary, lines, log
        self.computed_tokens, self.prompt_tokens = computed, prompt

    def line(self, scenario: str, role: str) -> dict[str, Any]:
        return next(x for x in self.lines if x.get("scenario") == scenario and x.get("role") == role)

    @property
    def diagnoses(self) -> dict[str, Any]:
        return self.summary.get("diagnoses") or self.summary.get("diagnosis") or {}


@pytest.fixture(scope="module")
def stress_run(vllm_server: Any, tmp_path_factory: pytest.TempPathFactory):
    """`stress_run(label)` -> StressResult: one stress run per configuration, shared by the tests."""
    runs: dict[str, StressResult] = {}

    def get(label: str) -> StressResult:
        if label in runs:
            return runs[label]
        srv = vllm_server(**SERVERS[label])
        out = tmp_path_factory.mktemp(f"vllm-stress-{label}")
        proc = run_evalkit(
            [
                "stress",
                "--base-url",
                srv.base_url,
                "--cycles",
                "1",
                "--seed",
                str(SEED),
                "--long-tokens",
                str(LONG_TOKENS),
                "--long-max-tokens",
                "16",
                "--short-max-tokens",
                "16",
                "--gen-tokens",
                str(GEN_TOKENS),
                "--timeout-s",
                "300",
                "--server-log",
                str(srv.log_path),
                "--no-progress",
                # Unsalted, so cancelled_prompt rebuilds the exact text from the seed (each configuration's server
                # is new to these prompts: nothing else sends them).
                "--reuse-prompts",
                "--out",
                str(out),
                "--name",
                f"stress-{label}",
            ],
            cwd=out,
            timeout_s=600,
        )
        assert proc.returncode == 0, proc.stderr
        run = run_dir_from(proc)
        computed, prompt = computed_prefix_tokens(srv, cancelled_prompt(run, SEED, LONG_TOKENS, GEN_TOKENS))
        runs[label] = StressResult(
            json.loads((run / "summary.json").read_text()),
            read_jsonl(run / "requests.jsonl"),
            srv.log_text(),
            computed,
            prompt,
        )
        return runs[label]

    return get


def test_a_second_run_of_the_same_prompts_names_vllms_prefix_cache(
    stress_run, vllm_server: Any, tmp_path: Path
) -> None:
    """First in this file, while the default configuration's server is still the one running (the next tests move
    to the other configuration's): the default run again, same seed, unsalted (`--reuse-prompts`), on the same warm
    server. Its long prompts come from vLLM's prefix cache, and the verdicts say so with vLLM's own counter, instead
    of calling a 0.1 s "prefill" a measurement or advising a longer prompt."""
    stress_run("default")  # the first run, which warmed the server with these prompts
    srv = vllm_server(**SERVERS["default"])
    argv = ["stress", "--base-url", srv.base_url, "--cycles", "1", "--seed", str(SEED)]
    argv += ["--long-tokens", str(LONG_TOKENS), "--long-max-tokens", "16", "--short-max-tokens", "16"]
    argv += ["--gen-tokens", str(GEN_TOKENS), "--timeout-s", "300", "--no-progress", "--reuse-prompts"]
    proc = run_evalkit([*argv, "--out", str(tmp_path), "--name", "again"], cwd=tmp_path, timeout_s=600)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run_dir_from(proc) / "summary.json").read_text())
    rate = summary["prefix_cache"]["hit_rate"]
    print(f"\n[realserver] vLLM second run of the same prompts: prefix-cache hit rate {rate}")
    for name in ("cancel_aborts", "head_of_line_blocking"):
        v = summary["diagnoses"][name]
        print(f"[realserver]   {name}: {v['verdict']}: {v.get('why')}")
        assert v["verdict"] in ("not exercised", "can't tell"), v
        assert "came from the server's prefix cache" in v["why"] and "vllm:prefix_cache_hits_total" in v["why"], v
    assert rate > 0.5, summary["prefix_cache"]
    assert "came from the server's prefix cache" in proc.stdout


@pytest.mark.parametrize("label", list(SERVERS))
def test_stress_run_is_clean_and_token_accurate(stress_run, label: str) -> None:
    """Zero errors; every long prompt within 2% of --long-tokens by vLLM's own usage count."""
    r = stress_run(label)
    print(f"\n[realserver] vLLM stress {label}: {r.summary['requests']} requests, errors {r.summary['errors']}")
    for text in r.summary.get("diagnosis_lines", []):
        print(f"[realserver]   {text}")
    assert r.summary["errors"] == 0, r.summary.get("error_samples")
    longs = [x["prompt_tokens"] for x in r.lines if x.get("role") == "long" and x.get("prompt_tokens")]
    assert longs and all(abs(n / LONG_TOKENS - 1) <= 0.02 for n in longs), longs


def test_short_insert_waits_behind_the_prefill_only_with_the_default_step_budget(stress_run) -> None:
    """Default: the inserted shorts wait out the long prompt's one-step prefill (head-of-line blocking: yes).
    512-token steps with a 256-token long-prefill threshold: they get in between two steps (no)."""
    one, two = stress_run("default"), stress_run("b512-lp256")
    hol1, hol2 = one.diagnoses["head_of_line_blocking"], two.diagnoses["head_of_line_blocking"]
    prefill1 = one.summary["metrics"]["long_prefill_s"]["p50"]
    t1 = one.summary["metrics"]["short_insert_ttft_s"]["p50"]
    t2 = two.summary["metrics"]["short_insert_ttft_s"]["p50"]
    print(
        f"\n[realserver] vLLM short-insert TTFT p50: default {t1:.2f} s, b512-lp256 {t2:.2f} s; long prefill "
        f"alone {prefill1:.2f} s / {two.summary['metrics']['long_prefill_s']['p50']:.2f} s"
    )
    print(f"[realserver] head-of-line blocking: default {hol1}; b512-lp256 {hol2}")
    assert hol1["detected"] is True
    # The verdict says what the evidence shows. With 256-token steps an inserted short gets in between two steps
    # when vLLM's API server and engine have the CPU to take it in; on a busy machine (two busy loops beside the
    # suite) they may not, and the shorts then wait out the remaining prefill (run 12 of #39: wait fraction 0.97,
    # TTFT 1.93 s of 2.0 s left). A short that waited it all is never called "not blocked".
    # The judged samples decide (a double insert sent after the prefill's last step is "can't tell" and its wait is
    # no evidence either way: run 19 of 2026-12-06 read 1.46 over all three samples, 0.43 over the judged one).
    # vLLM's step log (the server logs at DEBUG) says where each short's prompt entered the engine: such a sample is
    # held to the order of first tokens (a short that entered before the long prompt's last step answers first),
    # not to how long it waited on a busy machine.
    for r in (one, two):
        for smp in r.diagnoses["head_of_line_blocking"]["samples"]:
            if smp["evidence"] == "vllm_steps":
                short = next(x for x in r.lines if x["request_id"] == smp["request_id"])
                long = r.line(short["scenario"], "long")
                first_after = short["t_first_token"] >= long["t_first_token"] - 0.05
                print(f"[realserver] step log: {smp['request_id']} {smp['verdict']} ({smp['figures'].get('steps')})")
                assert (smp["verdict"] == "yes") == first_after, (smp, short, long)
    if all(smp["evidence"] == "vllm_steps" for smp in hol2["samples"]):
        assert hol1["detected"] is True
        return
    judged = [s["figures"] for s in hol2["samples"] if s["verdict"] != "can't tell"]
    waited = median([f["ttft_s"] / f["long_prefill_left_s"] for f in judged]) if judged else 1.0
    if waited < 0.5:
        assert hol2["detected"] is False and t1 >= 2 * t2, (hol2, t1, t2)
    else:
        print(f"[realserver] b512-lp256: the judged shorts waited {waited:.2f} of the prefill left")
        assert hol2["detected"] is not False, hol2


@pytest.mark.parametrize("label", list(SERVERS))
def test_vllm_says_where_the_cancel_stopped_the_prefill(stress_run, label: str) -> None:
    """The truth the verdict test holds evalkit to, from vLLM alone: the abort reached the engine inside the
    prefill (its log), and the prefix cache holds the whole cancelled prompt with the default one-step prefill
    (the engine ran it to its end), only its first steps with 256-token steps (it stopped at a step boundary)."""
    r = stress_run(label)
    c = r.line("cancel_then_short", "long")
    computed = r.computed_tokens
    print(
        f"\n[realserver] vLLM cancel on {label}: cancelled {c.get('t_done', 0) - c.get('t_sent', 0):.2f} s after "
        f"sending; vLLM logged the abort: {aborted_in_log(r.log, c['request_id'])}; the engine computed "
        f"{computed} of its {r.prompt_tokens} prompt tokens (prefix-cache hits when sent again)"
    )
    assert c["status"] == "cancelled" and c.get("ttft_s") is None  # no token came back: it was inside the prefill
    assert aborted_in_log(r.log, c["request_id"]), "vLLM's log has no 'Aborted request(s)' line for the cancel"
    if label == "default":
        assert computed == whole_blocks(r.prompt_tokens)
    else:
        # 256-token steps: the engine stops at the first step boundary after the abort reaches it. On a busy machine
        # the abort may reach it only after the last step (run 19 of 2026-12-06, two busy loops: cancelled 1.39 s
        # after sending, 1792 of 1792 blocks computed); the verdict test below then holds evalkit to "ran to its end".
        assert computed <= whole_blocks(r.prompt_tokens)
        if computed == whole_blocks(r.prompt_tokens):
            print("[realserver] b512-lp256: the abort reached vLLM's engine after its last prefill step")


@pytest.mark.parametrize("label", list(SERVERS))
def test_cancel_verdict_never_contradicts_what_vllm_did(stress_run, label: str) -> None:
    """evalkit's "cancel aborts the prefill" against vLLM's truth. With 256-token steps the engine stopped at a step
    boundary: "yes", or "can't tell" when a busy machine slowed the next request's decode; never "no". With the
    default one-step prefill the cancel landed in the prefill's last (only) step, which no engine can cut short:
    "can't tell" (#39's last-step rule), its why naming the next request's wait, about the prefill left; never "yes".
    And no sample rests on gauges that never counted the request (vLLM's update only between engine steps, so they
    read 0 through a one-step prefill); gauges that did count it agree with vLLM."""
    r = stress_run(label)
    ca = r.diagnoses["cancel_aborts"]
    ran_to_end = r.computed_tokens >= whole_blocks(r.prompt_tokens)
    print(f"\n[realserver] vLLM cancel verdict on {label}: {ca}; ran to its end by vLLM: {ran_to_end}")
    samples = ca["samples"]
    assert samples, ca
    # vLLM's step log (the server logs at DEBUG) counts the cancelled prompt's tokens in the steps around its abort:
    # "no" exactly when the engine computed all of it, as its prefix cache says
    for s in samples:
        if s["evidence"] == "vllm_steps":
            assert (s["verdict"] == "no") == ran_to_end, (s, r.computed_tokens, r.prompt_tokens)
    gauged = [s for s in samples if "gone_by_s" in (s.get("figures") or {})]
    if ran_to_end:
        # One step: vLLM's gauges (updated between steps) never counted the request, so no sample may rest on them.
        assert not gauged, samples
    else:
        # 256-token steps: a scrape between two steps counts the request (loaded run 14 of #39 caught one), and a
        # sample read from those gauges must say what vLLM did.
        assert all(s["verdict"] == "yes" for s in gauged), samples
    if ran_to_end:
        assert ca["verdict"] in ("no", "can't tell"), ca
        assert all(s["verdict"] != "yes" for s in samples), samples
        if ca["verdict"] == "can't tell":
            # Usually the last-step rule ("... about the prefill left"); on a busy machine the next request may start
            # before the prefill left would have ended (run 22 of 2026-12-06: after 0.65 s with 0.98 s left), and the
            # why then says the wait could be the prefill running on or other work. Either way: why and what would tell.
            assert all(s.get("why") and s.get("would_tell") for s in samples if s["verdict"] == "can't tell"), samples
    else:
        # The engine stopped at a step boundary. "yes" needs the next request to start before the prefill left would
        # have ended and to decode at its speed alone, which a busy machine can deny (CI at stop 51: started 0.84 s
        # after the cancel with 2.71 s left, decoded 1.57x slower than alone); then "can't tell", saying why and
        # what would tell. Never "no".
        for s in samples:
            print(f"[realserver] b512-lp256 cancel sample: {s['verdict']}: {s.get('figures')}")
        assert all(s["verdict"] != "no" for s in samples), samples
        assert ca["verdict"] in ("yes", "can't tell"), ca
        assert ca["aborts"] is (True if ca["verdict"] == "yes" else None), ca
        if ca["verdict"] == "can't tell":
            assert ca["why"] and ca["would_tell"], ca
