"""evalkit against llama-cpp-python's server (0.3.36, SmolLM2-135M, n_ctx 8192): `evalkit check` and one stress cycle.

Its known behaviours are what is checked: it refuses an X-Request-Id that is not a UUID (evalkit then sends UUIDs),
counts tokens at /extras/tokenize, serves one request at a time, kills the stream in progress when a new request
arrives (HTTP 200, then the body cut with no finish_reason: the preflight sees it, and stress counts each such stream
as `killed_stream` against the request it cut, naming the one still in flight that cut it), and does not abort a
prefill when the client disconnects (judged from its log: the next request starts only when that prefill is done).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit

from evalkit.realserver import llama_cpp_python
from evalkit.realserver.provisioning import model_path
from evalkit_stress.judge_cancel import SERVED_SHORT

pytestmark = pytest.mark.realserver

LONG_TOKENS = 1500  # an ~8 s prefill on 2 idle cores: the cancel, 1-4 s in, lands inside it
N_CTX = 8192  # a 1500-token prompt and its answer, with room to spare


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[llama_cpp_python.RunningServer]:
    """A running llama-cpp-python server, or a skip (a failure in CI) saying why there is none."""
    if os.environ.get("EVALKIT_SKIP_REAL") == "1":
        pytest.skip("EVALKIT_SKIP_REAL=1: real-server tests skipped")
    found = llama_cpp_python.locate()
    model = Path(os.environ.get("EVALKIT_REAL_MODEL") or model_path())
    reason = found if isinstance(found, str) else None if model.exists() else f"model missing at {model}"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"{reason} -- CI must run .ci/provision_llama_server.sh first", pytrace=False)
        pytest.skip(reason)
    assert not isinstance(found, str)
    running = llama_cpp_python.start(found, model, n_ctx=N_CTX, log_dir=tmp_path_factory.mktemp("lcp-logs"))
    print(f"[realserver] llama-cpp-python {llama_cpp_python.VERSION} up in {running.startup_s:.1f} s")
    yield running
    running.stop()


def _rows(run: Path) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in json.loads((run / "check.json").read_text())["rows"]}


def test_check_table(server: llama_cpp_python.RunningServer, tmp_path: Path) -> None:
    proc = run_evalkit(
        ["check", "--base-url", server.base_url, "--out", str(tmp_path), "--name", "check", "--thinking", "off"],
        cwd=tmp_path,
        timeout_s=120,
    )
    assert proc.returncode == 0, proc.stderr
    rows = _rows(run_dir_from(proc))
    assert "UUID X-Request-Id" in rows["evalkit's request"]["detail"]
    assert "empty body" in rows["evalkit's request"]["detail"]
    assert rows["streaming"]["supported"] and rows["max_tokens honoured"]["supported"]
    assert rows["tokenize endpoint"]["detail"].startswith("POST /extras/tokenize")
    assert rows["/props"]["supported"] is False and rows["/metrics"]["supported"] is False
    at_once = rows["requests served at once"]
    assert at_once["supported"] is False and "killed the stream in progress" in at_once["detail"]
    assert rows["usage in stream"]["supported"] is False  # tokens are counted from chunks
    kill = rows["a new request kills the stream in progress"]
    assert kill["supported"] is True and kill["detail"].startswith("yes, 5 of "), kill
    print(
        f"[realserver] llama-cpp-python check: request id echo {rows['X-Request-Id echo']['supported']}, "
        f"served at once: {at_once['detail']}"
    )


def _in_flight_at(x: dict[str, Any], lines: list[dict[str, Any]]) -> bool:
    """Whether another request was waiting or running when this one's stream was cut."""
    return any(o is not x and o["t_sent"] < x["t_done"] < o["t_done"] for o in lines)


def test_stress_cycle(server: llama_cpp_python.RunningServer, tmp_path: Path) -> None:
    proc = run_evalkit(
        [
            "stress",
            "--base-url",
            server.base_url,
            "--cycles",
            "1",
            "--seed",
            "42",
            "--long-tokens",
            str(LONG_TOKENS),
            "--long-max-tokens",
            "16",
            "--gen-tokens",
            "64",
            "--no-progress",
            "--out",
            str(tmp_path),
            "--name",
            "stress",
            "--server-log",
            str(server.log_path),
        ],
        cwd=tmp_path,
    )
    assert proc.returncode in (0, 1), proc.stderr
    run = run_dir_from(proc)
    summary = json.loads((run / "summary.json").read_text())
    lines = [x for x in read_jsonl(run / "requests.jsonl") if x.get("scenario") != "calibration"]
    prompts = read_jsonl(run / "long_prompts.jsonl")
    assert prompts and all(p["method"] == "extras" for p in prompts)
    assert all(abs(p["counted_tokens"] - LONG_TOKENS) <= 0.02 * LONG_TOKENS for p in prompts)
    # What the server itself evaluated (its log: "<n> prefix-match hit, remaining <m> prompt tokens to eval").
    served = [
        int(a) + int(b)
        for a, b in re.findall(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens", server.log_text())
        if int(a) + int(b) > LONG_TOKENS / 2
    ]
    # The server's count holds the chat template's tokens too (24 here) beside the fitted content's 2%.
    assert served and all(abs(n - LONG_TOKENS) <= 0.02 * LONG_TOKENS + 32 for n in served), served
    ok = [x for x in lines if x["status"] == "ok"]
    assert ok and all(x["request_label"] and len(x["request_id"]) == 36 for x in lines)
    assert not [x for x in lines if x.get("http_status") not in (200, None)]  # never an HTTP 400 again
    # Killed streams: HTTP 200, then the body cut with no finish_reason while another of our requests waited.
    killed = [x for x in lines if x["status"] == "error"]
    # A killed stream is a failed request: the run exits 1 naming the count (#39), 0 only when none was cut.
    assert proc.returncode == (1 if killed else 0), proc.stderr
    if killed:
        assert "requests failed" in proc.stderr and "broken stream" in proc.stderr, proc.stderr
    assert all(x["http_status"] == 200 and x["finish_reason"] is None and _in_flight_at(x, lines) for x in killed)
    # The preflight saw the server kill streams, so each cut stream is a killed_stream, content or not, naming the
    # request of ours whose arrival ended it.
    assert summary["stream_killing"]["kills"] is True, summary["stream_killing"]
    ids = {x["request_id"] for x in lines}
    assert all(x["error_kind"] == "killed_stream" and x["killed_by"] in ids for x in killed), [
        (x["error_kind"], x.get("killed_by")) for x in killed
    ]
    kinds = {e["kind"] for e in summary["error_requests"]}
    cancel = summary["diagnoses"]["cancel_aborts"]
    # A disconnect does not abort its prefill: its log shows the next request started only when that prefill ended.
    # On a loaded host the same prefill may run faster than the prompt alone did, and a late cancel then sees the
    # next start come early: the log cannot tell that from an abort ("can't tell", naming the time the server spent
    # on the cancelled request). What it must never say is "yes".
    assert cancel["verdict"] in ("no", "can't tell"), cancel
    assert all(s["verdict"] != "yes" for s in cancel["samples"]), cancel["samples"]
    if cancel["verdict"] == "no":
        assert cancel["evidence"] == "log" and cancel["granularity"] == "only at the end", cancel
    for s in cancel["samples"]:
        if s["evidence"] == "log" and s["verdict"] == "can't tell":  # the log's figures say why it could not decide
            assert s["figures"]["served_s"] >= SERVED_SHORT * s["figures"]["prefill_alone_s"], s
    print(
        f"[realserver] llama-cpp-python stress: {summary['requests']} requests, {len(ok)} ok, "
        f"{len(killed)} killed streams (error kinds {', '.join(sorted(kinds)) or 'none'}), long prompts counted "
        f"{[p['counted_tokens'] for p in prompts]}, served {served}"
    )
    print(f"[realserver] llama-cpp-python cancel: {cancel['verdict']} ({json.dumps(cancel.get('samples'))[:400]})")
