"""The stress verdicts against the sim's ground truth, over real HTTP, for every engine behaviour they judge.

One `evalkit stress --cycles 1` run per combination of yield / no yield, cancel that aborts at the next chunk /
at the end of a 4096-token batch / never, housekeeping on / off and 1 / 2 slots (16K-token long prompts at
`--time-scale 25`). A run takes ~10 s, mostly fixed start-up, so by default six combinations run that cover every
pair of settings; `EVALKIT_TEST_FULL_MATRIX=1` runs all 24. The verdicts from the run's files (timings, log,
/metrics) must agree with `/sim/events`; the same run with the server's evidence stripped (the client alone) must
agree or say "can't tell", never be wrong.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit.evidence.server_evidence import ServerEvidence
from evalkit.evidence.wait_parts import IDLE_SAVE, IN_SLOT_PREFILL, UNATTRIBUTED, WORDS
from evalkit.sim.launch import start_sim
from evalkit_stress.diagnose import diagnose
from evalkit_stress.judge_long_hurt import HURT_RATIO
from evalkit_stress.verdicts import CANT, NO, YES

SCALE = "25"
LONG = "16000"
UNLANDED = "unlanded"  # truth when the cancel reached the sim after the prefill was over
CANCELS = {
    "chunk": ["--cancel-aborts"],
    "batch": ["--cancel-aborts", "--cancel-batch-tokens", "4096"],
    "never": ["--no-cancel-aborts"],
}


def _run(tmp: Path, flags: list[str], scale: str = SCALE, code: int = 0) -> dict[str, Any]:
    log = tmp / "sim.log"
    with start_sim([*flags, "--time-scale", scale, "--prefill-chunk", "512", "--server-log-file", str(log)]) as sim:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalkit",
                "stress",
                "--base-url",
                sim.base_url,
                "--out",
                str(tmp),
                "--name",
                "run",
                "--no-progress",
                "--cycles",
                "1",
                "--seed",
                "42",
                "--time-scale",
                scale,
                "--long-tokens",
                LONG,
                "--gen-tokens",
                "48",
                "--server-log",
                str(log),
                "--metrics-interval",
                "0.02",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == code, p.stderr[-2000:]
        events = {e["request_id"]: e for e in sim.events()}
    run = Path(p.stdout.strip().splitlines()[-1])
    return {
        "summary": json.loads((run / "summary.json").read_text()),
        "events": events,
        "stdout": p.stdout,
        "lines": [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()],
    }


def _of(lines: list[dict[str, Any]], scenario: str, role: str) -> list[dict[str, Any]]:
    return [x for x in lines if x.get("scenario") == scenario and x.get("role") == role]


def truth(lines: list[dict[str, Any]], ev: dict[str, dict[str, Any]]) -> dict[str, str]:
    """What the sim's events say each verdict should be."""
    out = {}
    c = _of(lines, "cancel_then_short", "long")[0]
    e = ev[c["request_id"]]
    if not e["cancelled"] or e["engine_stopped"] is None or c.get("t_first_token") is not None:
        # A loaded machine sent the cancel after the prefill was over (the first token came, or the reply ended):
        # nothing was left that a cancel could abort. No verdict may say "yes" (checked by `agrees`).
        out["cancel"] = UNLANDED
    else:
        out["cancel"] = YES if e["stopped_at_tokens"] < e["prompt_tokens"] else NO
    votes = []
    for scen in ("short_insert", "double_insert"):
        long = ev[_of(lines, scen, "long")[0]["request_id"]]
        for s in _of(lines, scen, "short"):
            # Blocked: its prefill ended with or after the long one's (with --step-tokens a short prompt enters the
            # long prompt's last step, so it starts a step earlier but its first token comes in the same step).
            votes.append(ev[s["request_id"]]["prefill_done"] >= long["prefill_done"] - 0.002)
    out["hol"] = YES if sum(votes) >= len(votes) - sum(votes) else NO

    def prefill(scens: tuple[str, ...]) -> float:
        return statistics.median(
            ev[x["request_id"]]["prefill_done"] - ev[x["request_id"]]["prefill_start"]
            for s in scens
            for x in _of(lines, s, "long")
        )

    ratio = prefill(("short_insert", "double_insert")) / prefill(("long_alone",))
    out["hurt"] = "near" if abs(ratio - HURT_RATIO) < 0.04 else YES if ratio > HURT_RATIO else NO
    return out


def agrees(got: str, want: str, *, or_cant: bool = False) -> bool:
    """A verdict against the sim's truth: equal (or "can't tell" where allowed); "near" a threshold, anything; a
    cancel that never landed in the prefill, anything but "yes"."""
    if want == "near":
        return True
    if want == UNLANDED:
        return got != YES
    return got == want or (or_cant and got == CANT)


def client_only(lines: list[dict[str, Any]], metrics: dict[str, Any]) -> dict[str, Any]:
    """The verdicts from the same run with the server's timings, log and /metrics taken away."""
    return diagnose(
        metrics, [{**x, "server_timings": None} for x in lines if x.get("scenario") != "calibration"], ServerEvidence()
    ).to_json()


# Every pair of values of any two settings appears in at least one of these (a covering array).
PAIRWISE = [
    ("--yield", "chunk", "off", "1"),
    ("--yield", "batch", "on", "2"),
    ("--yield", "never", "on", "1"),
    ("--no-yield", "chunk", "on", "2"),
    ("--no-yield", "batch", "off", "1"),
    ("--no-yield", "never", "off", "2"),
]
FULL = list(itertools.product(["--yield", "--no-yield"], list(CANCELS), ["off", "on"], ["1", "2"]))


@pytest.mark.parametrize(
    "yielding,cancel,housekeeping,slots", FULL if os.environ.get("EVALKIT_TEST_FULL_MATRIX") else PAIRWISE
)
def test_verdicts_agree_with_the_sims_events(
    tmp_path: Path, yielding: str, cancel: str, housekeeping: str, slots: str
) -> None:
    flags = [yielding, *CANCELS[cancel], "--max-batch", slots]
    if housekeeping == "on":
        flags += ["--housekeeping-s-per-token", "0.0005"]  # 8 s after a 16K-token request, its prefill time
    r = _run(tmp_path, flags)
    want = truth(r["lines"], r["events"])
    d = r["summary"]["diagnoses"]
    got = {
        "cancel": d["cancel_aborts"]["verdict"],
        "hol": d["head_of_line_blocking"]["verdict"],
        "hurt": d["long_hurt_by_inserts"]["verdict"],
    }
    print(f"\n{flags}: truth {want}, verdicts {got}, evidence {d['split_evidence']}")
    for line in r["stdout"].splitlines():
        if line.strip().startswith(("cancel aborts", "head-of-line", "long request")):
            print(line)
    for k in got:
        assert agrees(got[k], want[k]), (k, got[k], want[k], d)
    if want["cancel"] == NO:
        assert d["cancel_aborts"]["granularity"] == "only at the end"
    if housekeeping == "on" and want["cancel"] == YES:
        assert "prompt-cache" in (d["cancel_aborts"]["next_delay_cause"] or ""), d["cancel_aborts"]
    alone = client_only(r["lines"], r["summary"]["metrics"])
    for key, name in (("cancel", "cancel_aborts"), ("hol", "head_of_line_blocking"), ("hurt", "long_hurt_by_inserts")):
        v = alone[name]["verdict"]
        assert agrees(v, want[key], or_cant=True), (key, v, want[key], alone[name])
        assert alone[name]["evidence"] == "client"
        if v == CANT:
            assert alone[name]["would_tell"]


# llama.cpp at -np 2 -b 512 (issue 27): shared steps, a cancel honoured at a 4096-token boundary, and the idle-slot
# save after each launch (silent; named only by the trace-level line), with the log's own timestamps.
STEP = [
    "--no-yield",
    "--cancel-aborts",
    "--cancel-batch-tokens",
    "4096",
    "--max-batch",
    "2",
    "--step-tokens",
    "512",
    "--log-timestamps",
]
IDLE = ["--idle-slot-save-s-per-token", "0.0003"]  # 16K tokens: 4.8 model s, 0.19 s at 25x


@pytest.mark.parametrize("extra", [[], IDLE, [*IDLE, "--trace-log"]], ids=["steps", "idle-save", "idle-save-traced"])
def test_shared_steps_and_silent_saves_agree_with_the_sims_events(tmp_path: Path, extra: list[str]) -> None:
    r = _run(tmp_path, [*STEP, *extra])
    want, d, ev = truth(r["lines"], r["events"]), r["summary"]["diagnoses"], r["events"]
    got = {
        "cancel": d["cancel_aborts"]["verdict"],
        "hol": d["head_of_line_blocking"]["verdict"],
        "hurt": d["long_hurt_by_inserts"]["verdict"],
    }
    shown = [(g["request_id"], g["gap_s"], g["cause"]) for g in d["silent_gaps"]]
    print(f"\n{extra}: truth {want}, verdicts {got}; gaps {shown}")
    for k in got:
        assert agrees(got[k], want[k]), (k, got[k], want[k], d)
    splits = {x["request_id"]: x for x in d["ttft_split"]}
    in_slot_shorts = 0
    for rid, e in ev.items():
        sp = splits.get(rid)
        if sp is None or e.get("launched") is None or e.get("prefill_start") is None or sp["in_slot_s"] is None:
            continue
        # the time in the slot as the sim knows it: the idle save it set off, then waiting for a step with room
        true_in_slot = e["prefill_start"] - e["launched"]
        assert abs(sp["in_slot_s"] - true_in_slot) <= 0.1, (rid, sp, e)  # log lines stamp real time, truth the timeline
    for x in d["head_of_line_blocking"]["samples"]:
        e = ev[x["request_id"]]
        if e["prefill_start"] - e["launched"] > 0.1 and x["verdict"] == YES:
            in_slot_shorts += 1
            assert IN_SLOT_PREFILL in x["figures"]["wait_parts_s"], x
    assert in_slot_shorts >= 2  # the inserted shorts waited in their slots for the long prompt's steps
    saves = {
        rid: e["idle_save_end"] - e["idle_save_start"]
        for rid, e in ev.items()
        if e.get("idle_save_start") is not None
        and e["idle_save_end"] - e["idle_save_start"] > 0.12
        and e["first_token"] is not None
    }  # (a cancelled prefill has no prefill start to measure a pause to)
    gaps = {g["request_id"]: g for g in d["silent_gaps"]}
    if not extra:
        assert not gaps, gaps  # no pause was made up
    else:
        assert saves and set(saves) <= set(gaps), (saves, gaps)
        for rid, took in saves.items():
            assert abs(gaps[rid]["gap_s"] - took) <= 0.1, (gaps[rid], took)
            if "--trace-log" in extra:
                assert gaps[rid]["cause"] == WORDS[IDLE_SAVE]
            else:  # silent at llama.cpp's default level: unattributed, with what would tell, never guessed
                assert gaps[rid]["cause"] == WORDS[UNATTRIBUTED] and "--no-cache-idle-slots" in gaps[rid]["would_tell"]
                assert gaps[rid]["idle_slots_at_launch"], gaps[rid]
    c = ev[_of(r["lines"], "cancel_then_short", "long")[0]["request_id"]]
    n = ev[_of(r["lines"], "cancel_then_short", "short")[0]["request_id"]]
    # launched beside the cancelled prompt, waited for its steps
    if c["engine_stopped"] is not None and n["launched"] < c["engine_stopped"] - 0.02:
        nd = d["cancel_aborts"]["samples"][0]["next_delay"]
        if "unattributed" in nd["parts_s"]:  # llama.cpp's evidence ("timings+log"): llama.cpp's trace-log advice
            assert "--no-cache-idle-slots" in nd["would_tell"], nd
        assert "in a launched slot" in nd["cause"], nd
        assert abs(nd["wait_s"] - (n["prefill_start"] - n["arrived"])) <= 0.06, (nd, n)
    alone = client_only(r["lines"], r["summary"]["metrics"])
    assert not alone["silent_gaps"]
    for key, name in (("cancel", "cancel_aborts"), ("hol", "head_of_line_blocking"), ("hurt", "long_hurt_by_inserts")):
        assert agrees(alone[name]["verdict"], want[key], or_cant=True), (key, alone[name])


def test_killed_streams_are_errors_of_their_own_kind_against_the_killed_request(tmp_path: Path) -> None:
    # At 5x (250 tok/s a stream) the preflight's 64-token probe lasts ~0.25 s: a loaded CI client still sends its
    # second request while the first streams (at 25x it once did not, and the probe rightly found no kill).
    r = _run(tmp_path, ["--kill-on-new-request", "--max-batch", "2"], scale="5", code=1)  # killed: failed requests
    s = r["summary"]
    # (the preflight's own probes are killed too, on purpose: that is how stress learns the server kills streams)
    killed = {rid for rid, e in r["events"].items() if e["status"] == "killed" and not rid.startswith("preflight-")}
    probes_killed = [rid for rid, e in r["events"].items() if e["status"] == "killed" and rid.startswith("preflight-")]
    kinds = {e["request_id"]: e["kind"] for e in s["error_requests"]}
    print(f"\nkilled by the sim: {sorted(killed)}; error kinds {s['error_kinds']}; {s['stream_killing']}")
    assert s["stream_killing"]["kills"] is True and len(probes_killed) >= 5, s["stream_killing"]
    assert killed and set(kinds) == killed and s["cycles"] == 1  # each kill is an error against its own request
    # Every killed stream is a killed_stream, before its first token or after some content (the real
    # llama-cpp-python server cuts mid-body too), and names the request whose arrival ended it.
    lines = {x["request_id"]: x for x in r["lines"]}
    ev = r["events"]
    for rid in killed:
        assert kinds[rid] == "killed_stream", (rid, kinds[rid], lines[rid].get("error"))
        killer = lines[rid]["killed_by"]
        # (the killer was in flight when the killed stream ended)
        assert ev[killer]["arrived"] <= ev[rid]["done"] + 0.01 <= ev[killer]["done"] + 0.02, (rid, killer)
    assert "killed_stream" in s["error_kinds"]
