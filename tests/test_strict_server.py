"""A strict OpenAI-only server (`evalkit sim --profile strict-transformers`, as `transformers serve`): every command
adapts to what it accepts and says so; a run whose requests failed does not pass; stress verdicts only about what
happened (issue 33). All over real HTTP against sim subprocesses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from evalkit.cli import main
from evalkit.runs.rundir import read_jsonl
from evalkit.sim.launch import SimProcess, start_sim
from runfixtures import bench_args

REFUSED = {"ignore_eos", "min_tokens", "chat_template_kwargs"}


@pytest.fixture(scope="module")
def strict() -> Iterator[SimProcess]:
    proc = start_sim(["--profile", "strict-transformers", "--time-scale", "20"])
    yield proc
    proc.stop()


def _manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def _post(url: str, body: dict) -> tuple[int, str]:
    async def go() -> tuple[int, str]:
        async with aiohttp.ClientSession() as http, http.post(url, json=body) as resp:
            return resp.status, await resp.text()

    return asyncio.run(go())


def _get(url: str) -> int:
    async def go() -> int:
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            return resp.status

    return asyncio.run(go())


def test_sim_strict_protocol(strict: SimProcess) -> None:
    chat = strict.base_url + "/chat/completions"
    base = {
        "model": "evalkit-sim",
        "messages": [{"role": "user", "content": "What is 2 + 3? Reply with only the number."}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    status, text = _post(chat, {**base, "ignore_eos": True, "top_k": 5})
    assert status == 422
    detail = json.loads(text)["detail"]
    assert [(d["type"], d["loc"]) for d in detail] == [
        ("extra_forbidden", ["body", "ignore_eos"]),
        ("extra_forbidden", ["body", "top_k"]),
    ]
    status, text = _post(chat, {**base, "model": "another-model"})
    assert status == 400 and "another-model" in text
    status, text = _post(chat, base)
    events = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    assert status == 200 and "[DONE]" not in text
    assert [e for e in events if "usage" in e] == [events[-1]] and events[-1]["choices"][0]["finish_reason"]
    root = strict.base_url[: -len("/v1")]
    assert [_get(root + p) for p in ("/metrics", "/props")] == [404, 404]
    assert _post(root + "/tokenize", {"content": "x"})[0] == 404
    assert _get(root + "/sim/events") == 200  # the sim's own ground truth stays served for tests


def test_check_names_each_refused_field(strict: SimProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--base-url", strict.base_url, "--out", str(tmp_path), "--name", "c"])
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "c" / "check.json").read_text())
    rows = {r["name"]: r for r in data["rows"]}
    assert code == 0 and set(data["fields"]["refused"]) == REFUSED
    for name in REFUSED:
        row = rows[f"field {name}"]
        assert row["supported"] is False and "HTTP 422" in row["detail"] and f"'{name}'" in row["detail"]
        assert f"field {name}" in out
    # The 422 on ignore_eos is named, never read as max_tokens not honoured.
    assert rows["max_tokens honoured"]["supported"] is True
    assert (
        rows["fixed output length"]["supported"] is False
        and "length_forced false" in rows["fixed output length"]["detail"]
    )
    assert "llama-server" not in out and "--metrics" not in out  # no other server's flags
    assert set(_manifest(tmp_path / "c")["field_support"]["refused"]) == REFUSED


COMMANDS = {
    "bench": ["bench", "--runs", "1", "--max-tokens", "32", "--concurrency", "2"],
    "stress": [
        "stress",
        "--cycles",
        "1",
        "--seed",
        "3",
        "--long-tokens",
        "3000",
        "--gen-tokens",
        "48",
        "--time-scale",
        "20",
        "--no-progress",
    ],
    "capability": ["capability", "--thinking", "low", "--limit", "1"],
    "load": ["load", "--concurrency", "2", "--requests", "6", "--output-tokens", "16", "--prompt-tokens", "60"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_against_a_strict_server(strict: SimProcess, tmp_path: Path, command: str) -> None:
    strict.reset()
    code = main([*COMMANDS[command], "--base-url", strict.base_url, "--out", str(tmp_path), "--name", "r"])
    run = tmp_path / "r"
    lines = [x for x in read_jsonl(run / "requests.jsonl") if x.get("phase") != "warmup"]
    if command == "load" and code == 1:  # only a point where a busy machine's client fell behind (issue #58)
        assert json.loads((run / "summary.json").read_text())["client"]["invalid_points"]
        code = 0
    assert code == 0 and lines
    assert [x for x in lines if x.get("status") not in ("ok", "cancelled") or x.get("outcome") == "error"] == []
    support = _manifest(run)["field_support"]
    assert set(support["refused"]) == REFUSED and set(support["not_sent"]) >= REFUSED
    # Only the preflight's probes of a field were refused: not one of the command's own requests.
    refused = [e for e in strict.events() if e["status"] == "error"]
    assert refused and all(e["request_id"].startswith("preflight-") for e in refused)
    if command == "bench":
        summary = json.loads((run / "summary.json").read_text())
        assert summary["length_mode"] == "prompt" and summary["length_forced"] is False
        assert all(x["length_forced"] is False for x in lines)


def test_min_tokens_when_ignore_eos_is_refused(sim, tmp_path: Path) -> None:
    s = sim("--time-scale", "20", "--reject-fields", "ignore_eos")
    assert (
        main(
            [
                *bench_args(s.base_url, tmp_path, "b"),
                "--runs",
                "1",
                "--max-tokens",
                "24",
                "--prompts",
                str(_prompts(tmp_path, "What is 2 + 2? Reply with only the number.")),
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    lines = [x for x in read_jsonl(tmp_path / "b" / "requests.jsonl") if x.get("bench_key")]
    # A one-number answer ran to max_tokens: min_tokens forced it, and the lines say so.
    assert summary["length_mode"] == "min_tokens" and summary["errors"] == 0
    assert lines and all(x["completion_tokens"] == 24 and x["length_forced"] for x in lines)


def _prompts(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"name": "q", "prompt": text}) + "\n")
    return path


def test_bench_whose_every_request_fails_exits_1(sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The preflight's short probe fits the context; every bench prompt does not.
    s = sim("--time-scale", "20", "--context-tokens", "120")
    code = main(
        [
            *bench_args(s.base_url, tmp_path, "b"),
            "--runs",
            "2",
            "--concurrency",
            "1",
            "--prompts",
            str(_prompts(tmp_path, "word " * 200)),
        ]
    )
    captured = capsys.readouterr()
    err = [line for line in captured.err.splitlines() if line.startswith("bench:")]
    assert code == 1 and len(err) == 1
    assert (
        "every one of the 2 requests failed" in err[0] and "HTTP 400" in err[0] and "maximum context length" in err[0]
    )
    assert "– (2 failed)" in captured.out  # the table (on stdout: #58) shows no figure made of nothing
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["prompts"]["q"]["tok_s"] is None and summary["prompts"]["q"]["failed"] == 2
    assert main(["report", str(tmp_path / "b"), "-o", str(tmp_path / "r.md")]) == 0
    assert "– (2 failed)" in (tmp_path / "r.md").read_text()


CANCEL_TOO_LATE = """\
cycles = 1

[[scenario]]
name = "cancel_then_short"

  [[scenario.request]]
  id = "long"
  prompt = "long"
  tokens = 1500
  cancel = { offset = 40.0 }

  [[scenario.request]]
  id = "short"
  prompt = "short"
  send = { after = "long", on = "done" }
"""


def test_cancel_after_the_long_request_ended_is_not_exercised(sim, tmp_path: Path) -> None:
    # The long request (1500 tokens, ~1 s of model time) is done long before its cancel at 40 s: no cancel is sent.
    s = sim("--time-scale", "20")
    scenario = tmp_path / "late-cancel.toml"
    scenario.write_text(CANCEL_TOO_LATE)
    assert (
        main(
            [
                "stress",
                "--scenario",
                str(scenario),
                "--seed",
                "1",
                "--time-scale",
                "20",
                "--no-progress",
                "--base-url",
                s.base_url,
                "--out",
                str(tmp_path),
                "--name",
                "s",
            ]
        )
        == 0
    )
    run = tmp_path / "s"
    long = [x for x in read_jsonl(run / "requests.jsonl") if x.get("role") == "long"]
    assert long and long[0]["status"] == "ok" and long[0]["cancel_sent"] is False
    assert long[0]["outcome"] == "correct"  # judged as the answer it is, not "cancelled as planned"
    summary = json.loads((run / "summary.json").read_text())
    verdict = summary["diagnoses"]["cancel_aborts"]
    assert verdict["verdict"] == "not exercised" and "ended before its planned cancel" in verdict["why"]
    assert "--long-tokens" in verdict["would_tell"]
    assert summary["metrics"]["post_cancel_ttft_s"]["n"] == 0
    assert summary["not_exercised"]["post_cancel_ttft_s"]["count"] == 1
    assert main(["report", str(run), "-o", str(tmp_path / "r.md")]) == 0
    report = (tmp_path / "r.md").read_text()
    rows = [line for line in report.splitlines() if "post_cancel_ttft_s" in line or "after cancelling" in line]
    assert rows and all("not exercised" in line for line in rows)
    assert "cancel aborts the prefill `diagnoses.cancel_aborts` | not exercised" in report


def test_field_support_is_cached_per_server(
    strict: SimProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVALKIT_NO_FIELD_CACHE", raising=False)
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    sources, probes = [], []
    for name in ("a", "b"):
        strict.reset()
        assert (
            main(
                [
                    *bench_args(strict.base_url, tmp_path, name),
                    "--runs",
                    "1",
                    "--max-tokens",
                    "16",
                ]
            )
            == 0
        )
        sources.append(_manifest(tmp_path / name)["field_support"]["source"])
        probes.append(sum(e["request_id"].startswith("preflight-") for e in strict.events()))
        assert set(_manifest(tmp_path / name)["field_support"]["refused"]) == REFUSED
    assert sources[0] == "probed" and sources[1].startswith("cache ")
    assert probes[1] < probes[0]  # the second run sent no field probes
    assert (tmp_path / "cache" / "field-support.json").is_file()


@pytest.mark.parametrize(
    "identity,kind",
    [
        ({"server_type": "llama.cpp"}, "llama.cpp"),
        ({"server_type": "vllm"}, "vllm"),
        ({"server_type": None, "owned_by": ["fastllm"]}, "fastllm"),
        ({"server_type": None, "owned_by": ["me"]}, "llama-cpp-python"),
        (
            {
                "server_type": None,
                "owned_by": ["HuggingFaceTB"],
                "openapi": {"title": "FastAPI", "paths": ["/health", "/v1/chat/completions", "/v1/responses"]},
            },
            "transformers",
        ),
        (
            {
                "server_type": None,
                "openapi": {"title": "FastAPI", "paths": ["/v1/chat/completions", "/v1/responses", "/tokenize"]},
            },
            "unknown",
        ),
        ({"server_type": None, "owned_by": ["evalkit-sim"]}, "unknown"),
    ],
)
def test_server_kind_and_its_advice(identity: dict, kind: str) -> None:
    from evalkit.evidence.server_kind import advice, server_kind

    assert server_kind(identity) == kind
    metrics = advice(kind, "metrics")
    assert ("--metrics" in metrics) == (kind == "llama.cpp")  # never another server's flag
    assert "--enable-metrics" not in metrics or kind == "sglang"


@pytest.mark.parametrize(
    "bare_tokens,forced,expected",
    [
        (14, True, ("accepted", True)),  # a reply that ends after 14 tokens ran to 20 and 33: the field forced it
        (14, False, ("ignored", False)),  # taken, but the reply stopped as without it (FastLLM, llama-cpp-python)
        (64, True, ("accepted", False)),  # the model never stops early: effect not shown, not relied on
    ],
)
def test_forced_length_is_judged_past_where_the_model_stops(
    bare_tokens: int, forced: bool, expected: tuple[str, bool]
) -> None:
    from evalkit.client.field_support import NOT_SHOWN, ProbeReply, length_fields, probe_fields, unforced_words

    asked: list[int] = []

    async def send(body: dict, headers: dict) -> ProbeReply:
        cap = body["max_tokens"]
        natural = min(cap, bare_tokens)
        n = cap if forced and ("ignore_eos" in body or "min_tokens" in body) else natural
        if "ignore_eos" in body:
            asked.append(cap)
        return ProbeReply(200, "", True, n, True, "length" if n >= cap else "stop", headers.get("X-Request-Id"))

    support = asyncio.run(probe_fields(send, "m", {}, lambda: "preflight-x"))
    v = support.fields["ignore_eos"]
    assert (v.status, v.checked) == expected, v
    assert length_fields(support, 64)[1] == ("ignore_eos" if expected == ("accepted", True) else "prompt")
    if expected == ("accepted", True):
        assert asked == [20, 33]  # two lengths past the model's own stop
    words = unforced_words(support)
    assert ("ignored" in words) == (expected[0] == "ignored") and "refused" not in words
    assert (NOT_SHOWN in v.detail) == (bare_tokens == 64)
