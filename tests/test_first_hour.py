"""What a new user meets in the first hour (issue #58, items 5 and 6), each over real HTTP against `evalkit sim`:
options that must leave a visible trace (--judge-url with nothing to send, load without --slo, a load point where
the client fell behind, --repeats auto ending undecided) and the command line's small things (a mistyped flag, a
base URL without /v1, a refused connection, bare `evalkit`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from evalkit.sim.launch import start_sim

EVALKIT = [sys.executable, "-m", "evalkit"]


def _run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EVALKIT, *argv], capture_output=True, text=True, timeout=timeout)


def test_a_judge_with_nothing_to_judge_says_so(tmp_path: Path) -> None:
    """--judge-url given, every answer read surely by the rules: nothing is sent, and the run says so."""
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"id": "gsm8k:0", "content": "Half of the eggs are sold.\n#### 18"}) + "\n")
    with start_sim(["--time-scale", "1000"]) as judge:
        p = _run(
            "capability",
            "--replay",
            str(answers),
            "--out",
            str(tmp_path),
            "--name",
            "r",
            "--judge-url",
            judge.base_url,
            "--judge-model",
            "evalkit-sim",
        )
        with urllib.request.urlopen(judge.root_url + "/sim/events", timeout=10) as r:
            asked = [e for e in json.load(r)["events"] if e["kind"] == "judge"]
    assert p.returncode == 0, p.stderr[-2000:]
    assert asked == []
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("judge evalkit-sim"))
    assert f"({judge.base_url}): asked about 0 of 1 lines" in line and "nothing was sent" in line


def test_load_without_slo_claims_no_target_met(tmp_path: Path) -> None:
    with start_sim([]) as sim:
        p = _run(
            "load",
            "--base-url",
            sim.base_url,
            "--out",
            str(tmp_path),
            "--name",
            "l",
            "--no-metrics",
            "--concurrency",
            "2",
            "--requests",
            "6",
            "--prompt-tokens",
            "16",
            "--output-tokens",
            "4",
        )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "no --slo targets to meet" in p.stderr and "meets targets" not in p.stderr
    head, row = p.stdout.splitlines()[:2]
    assert head.split()[-2:] == ["meets", "valid"] and row.split()[-2] == "-", (head, row)  # no target: no "yes"
    assert not any(ln.startswith("meets ") for ln in p.stdout.splitlines())


def test_a_load_point_where_the_client_fell_behind_exits_1(tmp_path: Path) -> None:
    """2,000 requests/s from one client process: it cannot send on time, the point is invalid, and the run ends
    with exit 1 and a last line that says why, not exit 0 after a table."""
    with start_sim([]) as sim:
        p = _run(
            "load",
            "--base-url",
            sim.base_url,
            "--out",
            str(tmp_path),
            "--name",
            "fast",
            "--no-metrics",
            "--rate",
            "2000",
            "--requests",
            "300",
            "--warmup",
            "0",
            "--prompt-tokens",
            "16",
            "--output-tokens",
            "2",
        )
    summary = json.loads((tmp_path / "fast" / "summary.json").read_text())
    invalid = summary["client"].get("invalid_points") or []
    if not invalid:
        # the sim fell behind first (seen in the full suite: TTFT p99 13.7 s, the client on time): a valid point is
        # exit 0 with no "invalid" line; what must never be is a valid exit over an invalid point, or the reverse
        assert p.returncode == 0 and "invalid" not in p.stderr, p.stderr[-2000:]
        return
    assert p.returncode == 1, p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("load: invalid: the client fell behind") and "--client-procs" in last
    assert invalid[0]["load"] == 2000


def test_repeats_auto_that_ends_undecided_exits_1_saying_so(tmp_path: Path) -> None:
    """Against a baseline of the same accuracy, ±0.01 in 2 rounds cannot be decided either way: exit 1, and the
    last line names what is undecided."""
    env = {**os.environ, "EVALKIT_DATA_DIR": os.environ.get("EVALKIT_DATA_DIR", "../shared/datasets")}
    common = ["--thinking", "off", "--datasets", "gsm8k", "--limit", "6", "--out", str(tmp_path)]
    with start_sim(["--time-scale", "1000", "--accuracy", "0.5", "--seed", "1"]) as sim:
        url = ["--base-url", sim.base_url]
        base = subprocess.run(
            [*EVALKIT, "capability", *url, *common, "--name", "base", "--repeats", "2", "--temperature", "0.7"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert base.returncode == 0, base.stderr[-2000:]
        p = subprocess.run(
            [*EVALKIT, "capability", *url, *common, "--name", "auto", "--repeats", "auto", "--max-repeats", "2"]
            + ["--margin", "0.01", "--baseline", str(tmp_path / "base")],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    summary = json.loads((tmp_path / "auto" / "summary.json").read_text())
    assert summary["repeats_auto"]["decided"] is False, summary["repeats_auto"]
    assert p.returncode == 1, p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("capability: --repeats auto ended undecided after 2 of at most 2 rounds: gsm8k"), last


def test_a_mistyped_flag_is_the_commands_error_with_the_nearest_flag() -> None:
    p = _run("bench", "--modle", "x")
    assert p.returncode == 2
    assert p.stderr.strip() == (
        "evalkit bench: error: unrecognized arguments: --modle x; did you mean --model (for --modle)? (see --help)"
    )
    p = _run("load", "--sloo", "ttft_p99_s<=1")
    assert p.returncode == 2 and p.stderr.startswith("evalkit load: error: ") and "did you mean --slo" in p.stderr
    p = _run("bench", "--zzzzzz")  # nothing near: no guess
    assert p.returncode == 2 and "did you mean" not in p.stderr


def test_bare_evalkit_prints_the_help() -> None:
    p = _run()
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.startswith("usage: evalkit") and "demo" in p.stdout and "bench" in p.stdout


def test_a_base_url_without_v1_gets_the_hint(tmp_path: Path) -> None:
    with start_sim([]) as sim:
        root = sim.base_url.removesuffix("/v1")
        p = _run("bench", "--base-url", root, "--out", str(tmp_path))
    assert p.returncode == 2
    assert f"(hint: an OpenAI-compatible base URL ends in /v1: try --base-url {root}/v1)" in p.stderr


def test_a_refused_connection_is_said_plainly(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = _run("bench", "--base-url", f"http://127.0.0.1:{port}/v1", "--out", str(tmp_path))
    assert p.returncode == 2
    assert p.stderr.strip() == (
        f"evalkit bench: error: cannot reach server at http://127.0.0.1:{port}/v1: connection refused "
        "(nothing listens there: is the server running, on this host and port?)"
    )
    assert "ssl:" not in p.stderr
