"""`evalkit check` against the sim, each quirk switched on by a sim flag; the preflight that stops bench/stress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.client.http_errors import describe
from evalkit.client.probe import ESSENTIAL_TRIES
from evalkit.client.stream_killing import KILL_ROW, KILL_TRIES
from evalkit.runs.rundir import read_jsonl
from runfixtures import bench_args


def _check(s, tmp_path: Path, *flags: str, name: str = "c") -> tuple[int, dict[str, dict]]:
    code = main(["check", "--base-url", s.base_url, "--out", str(tmp_path), "--name", name, *flags])
    data = json.loads((tmp_path / name / "check.json").read_text())
    assert data["exit"] == code
    return code, {r["name"]: r for r in data["rows"]}


def test_check_full_sim(sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = sim("--time-scale", "20")
    code, rows = _check(s, tmp_path)
    out = capsys.readouterr().out
    assert code == 0 and "requests served at once" in out and out.strip().endswith(str(tmp_path / "c"))
    assert rows["evalkit's request"]["detail"] == "accepted as sent"
    for name in (
        "streaming",
        "usage in stream",
        "X-Request-Id echo",
        "max_tokens honoured",
        "field ignore_eos",
        "fixed output length",
        "tokenize endpoint",
        "thinking off",
        "thinking low",
    ):
        assert rows[name]["supported"] is True, name
    assert rows["/props"]["supported"] is False
    assert rows["tokenize endpoint"]["detail"].startswith("POST /tokenize")


def test_check_rows_switched_off(sim, tmp_path: Path) -> None:
    s = sim("--time-scale", "20", "--no-stream-usage", "--no-tokenize", "--max-batch", "1")
    code, rows = _check(s, tmp_path, "--thinking", "")
    assert code == 1  # stress cannot fit its long prompts without /tokenize or usage
    assert rows["usage in stream"]["supported"] is False and rows["tokenize endpoint"]["supported"] is False
    assert rows["token counting for stress"]["supported"] is False
    assert "thinking off" not in rows
    served = float(rows["requests served at once"]["detail"].split()[0].lstrip("~"))
    assert served < 1.5  # one slot: the pair takes about twice as long as one alone
    again = main(
        [
            "check",
            "--base-url",
            s.base_url,
            "--out",
            str(tmp_path),
            "--name",
            "d",
            "--for",
            "capability",
            "--thinking",
            "",
        ]
    )
    assert again == 0


def test_uuid_request_ids(sim, tmp_path: Path) -> None:
    s = sim("--time-scale", "20", "--uuid-request-ids")
    code, rows = _check(s, tmp_path, "--thinking", "")
    assert code == 0 and "UUID X-Request-Id" in rows["evalkit's request"]["detail"]
    assert "empty body" in rows["evalkit's request"]["detail"]
    s.reset()
    assert (
        main(
            [
                *bench_args(s.base_url, tmp_path, "b"),
                "--runs",
                "1",
                "--max-tokens",
                "16",
                "--concurrency",
                "1",
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "b" / "check.json").read_text())["uuid_request_ids"] is True
    lines = read_jsonl(tmp_path / "b" / "requests.jsonl")
    events = {e["request_id"]: e for e in s.events()}
    assert lines and all(x["status"] == "ok" and x["request_label"].startswith("bench-") for x in lines)
    assert all(events[x["request_id"]]["completion_tokens"] == x["completion_tokens"] for x in lines)


def test_killed_stream_reported(sim, tmp_path: Path) -> None:
    s = sim("--time-scale", "5", "--kill-on-new-request", "--max-batch", "1")  # (see test_stress_verdicts' kill test)
    code, rows = _check(s, tmp_path, "--thinking", "")
    row = rows["requests served at once"]
    assert code == 0 and row["supported"] is False and "killed the stream in progress" in row["detail"]
    kill = rows[KILL_ROW]
    assert kill["supported"] is True and kill["detail"].startswith(f"yes, {KILL_TRIES} of ")
    killed = [e for e in s.events() if e["status"] == "killed"]
    assert len(killed) >= KILL_TRIES  # one per try, plus the one the concurrency row saw


def test_random_disconnects_are_not_called_stream_killing(sim, tmp_path: Path) -> None:
    # One stream in five cut at random: a kill needs every try to show one (odds ~1e-4 per check that all five
    # do), and one clean try is a no.
    s = sim("--time-scale", "20", "--disconnect-rate", "0.2", "--seed", "4")
    for name in "abc":
        _, rows = _check(s, tmp_path, "--thinking", "", name=name)
        assert rows[KILL_ROW]["supported"] is not True, rows[KILL_ROW]
    s2 = sim("--time-scale", "20")
    _, rows = _check(s2, tmp_path, "--thinking", "", name="clean")
    assert rows[KILL_ROW]["supported"] is False and rows[KILL_ROW]["detail"].startswith("no:")


def test_refused_field_named(sim, tmp_path: Path) -> None:
    # A refused optional field is named and left out: evalkit's request goes through without it (issue 33).
    s = sim("--time-scale", "20", "--reject-fields", "stream_options")
    code, rows = _check(s, tmp_path, "--thinking", "")
    assert code == 0
    row = rows["evalkit's request"]
    assert row["supported"] is True and "accepted without stream_options" in row["detail"]
    assert "rejects the request field" in row["detail"]
    assert rows["field stream_options"]["supported"] is False and rows["usage in stream"]["supported"] is False


@pytest.mark.parametrize(
    "command",
    [
        ["stress", "--cycles", "1", "--seed", "1", "--long-tokens", "3000", "--no-progress"],
        ["bench", "--runs", "1"],
        ["capability", "--thinking", "off", "--limit", "2"],
    ],
)
def test_server_refusing_everything_stops_after_preflight(
    sim, tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    s = sim("--time-scale", "20", "--fail-rate", "1.0")
    assert main([*command, "--base-url", s.base_url, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "HTTP 500" in err[0] and "simulated internal server error" in err[0]
    # Only the probe's tries reached the server, not one request of the run itself.
    probes = [e for e in s.events() if e["request_id"].startswith("preflight-")]
    assert len(probes) == len(s.events()) <= ESSENTIAL_TRIES


def test_unreachable_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach server" in err[0]


@pytest.mark.parametrize(
    "status,body,sent,rid,expected",
    [
        (400, "", {}, "ek-1", "HTTP 400: empty body (hint: the server may demand a UUID in X-Request-Id"),
        (400, "", {}, "6f0c1d2e-9a4b-4c3d-8e5f-0a1b2c3d4e5f", "HTTP 400: empty body"),
        (
            400,
            '{"error":{"message":"Unrecognized request argument supplied: foo"}}',
            {"foo": 1},
            None,
            "(hint: the server rejects the request field 'foo')",
        ),
        (
            400,
            "[{'type': 'extra_forbidden', 'loc': ('body', 'top_k'), 'msg': 'Extra inputs are not permitted'}]",
            {"top_k": 1},
            None,
            "rejects the request field 'top_k'",
        ),
        (
            404,
            '{"error":{"message":"The model `gpt-x` does not exist."}}',
            {"model": "gpt-x"},
            None,
            "does not serve model 'gpt-x'",
        ),
        (
            400,
            "This model's maximum context length is 8192 tokens. However, you requested 9000",
            {},
            None,
            "too long for the server's context",
        ),
        (500, "x" * 400, {}, None, "HTTP 500: " + "x" * 299 + "…"),
    ],
)
def test_error_lines(status: int, body: str, sent: dict, rid: str | None, expected: str) -> None:
    line = describe(status, body, sent, rid)
    assert expected in line
    if rid is not None and "hint" not in expected:
        assert "hint" not in line
