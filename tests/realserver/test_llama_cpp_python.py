"""evalkit against llama-cpp-python's server (0.3.36, SmolLM2-135M, n_ctx 8192): `evalkit check` and one stress cycle.

Its known behaviours are what is checked: it refuses an X-Request-Id that is not a UUID (evalkit then sends UUIDs),
counts tokens at /extras/tokenize, serves one request at a time, kills the stream in progress when a new request
arrives (HTTP 200, no content, no finish_reason: error kind `killed_stream`), and does not abort a prefill when
the client disconnects.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit

from evalkit.realserver import llama_cpp_python
from evalkit.realserver.provisioning import model_path

pytestmark = pytest.mark.realserver

LONG_TOKENS = 3000
N_CTX = 8192  # a 3000-token prompt and its answer, with room to spare


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
    proc = run_evalkit(["check", "--base-url", server.base_url, "--out", str(tmp_path), "--name", "check",
                        "--thinking", "off"], cwd=tmp_path, timeout_s=120)
    assert proc.returncode == 0, proc.stderr
    rows = _rows(run_dir_from(proc))
    assert "UUID X-Request-Id" in rows["evalkit's request"]["detail"]
    assert "empty body" in rows["evalkit's request"]["detail"]
    assert rows["streaming"]["supported"] and rows["max_tokens honoured"]["supported"]
    assert rows["tokenize endpoint"]["detail"].startswith("POST /extras/tokenize")
    assert rows["/props"]["supported"] is False and rows["/metrics"]["supported"] is False
    served = float(rows["requests served at once"]["detail"].split()[0].lstrip("~"))
    print(f"[realserver] llama-cpp-python check: usage in stream {rows['usage in stream']['supported']}, "
          f"request id echo {rows['X-Request-Id echo']['supported']}, served at once ~{served:.2f}")


def test_stress_cycle(server: llama_cpp_python.RunningServer, tmp_path: Path) -> None:
    proc = run_evalkit(["stress", "--base-url", server.base_url, "--cycles", "1", "--seed", "42",
                        "--long-tokens", str(LONG_TOKENS), "--long-max-tokens", "16", "--gen-tokens", "64",
                        "--no-progress", "--out", str(tmp_path), "--name", "stress"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = run_dir_from(proc)
    summary = json.loads((run / "summary.json").read_text())
    lines = [x for x in read_jsonl(run / "requests.jsonl") if x.get("scenario") != "calibration"]
    prompts = read_jsonl(run / "prompts.jsonl")
    assert prompts and all(abs(p["counted_tokens"] - LONG_TOKENS) <= 0.02 * LONG_TOKENS for p in prompts)
    served_long = [x["prompt_tokens"] for x in lines if x.get("role") == "long" and x.get("prompt_tokens")]
    assert all(abs(n - LONG_TOKENS) <= 0.02 * LONG_TOKENS for n in served_long)
    ok = [x for x in lines if x["status"] == "ok"]
    assert ok and all(x["request_label"] and len(x["request_id"]) == 36 for x in lines)
    kinds = {e["kind"] for e in summary["error_requests"]}
    assert kinds <= {"killed_stream"}, summary["error_requests"]  # never an HTTP 400 again
    print(f"[realserver] llama-cpp-python stress: {summary['requests']} requests, {len(ok)} ok, "
          f"{summary['errors']} errors ({', '.join(sorted(kinds)) or 'none'}), long prompts counted "
          f"{[p['counted_tokens'] for p in prompts]}, served {served_long}")
    print(f"[realserver] llama-cpp-python diagnoses: {json.dumps(summary.get('diagnoses'))[:600]}")
