"""Long commands are never silent (issue #58): with standard error a log (a pipe here), bench, capability, stress and
load print a progress line at least every `$EVALKIT_PROGRESS_INTERVAL_S` seconds (30 s at most by default) with
done/total, the time so far and an estimate of the time left; on a terminal (a pty here) they draw tqdm's bar
instead, and no such lines. Each command runs against an `evalkit sim` over real HTTP, slowed so it lasts several
intervals; the lines are timed as they arrive."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit import progress
from evalkit.sim.launch import SimProcess, start_sim

INTERVAL = 1.0
LINE = re.compile(
    r"^(?P<desc>[\w .:/-]+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>\w+) \(\d+%\), (?P<elapsed>[\d hmins]+) so far"
)


@pytest.fixture(scope="module")
def slow_sim(data_dir: Path) -> Iterator[SimProcess]:
    """A sim decoding at 40 tok/s, so a short bench lasts about 20 s."""
    with start_sim(["--decode-rate", "40", "--data-dir", str(data_dir)]) as sim:
        yield sim


def _timed_stderr(argv: list[str], timeout: float = 240) -> tuple[int, list[tuple[float, str]], str]:
    """Run `python -m evalkit ARGV` with standard error a pipe; each stderr line with the second it arrived."""
    env = dict(os.environ, **{progress.ENV_INTERVAL: str(INTERVAL)})
    p = subprocess.Popen(
        [sys.executable, "-m", "evalkit", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert p.stderr is not None and p.stdout is not None
    start = time.monotonic()
    lines: list[tuple[float, str]] = []
    for line in p.stderr:
        lines.append((time.monotonic() - start, line.rstrip("\n")))
        assert time.monotonic() - start < timeout
    out = p.stdout.read()
    return p.wait(timeout=30), lines, out


def _assert_steady_lines(lines: list[tuple[float, str]], desc: str) -> list[re.Match[str]]:
    """Progress lines of `desc` arrive at least every 2.5 intervals from the first to the last, with a count that
    never goes back and never passes the total, and an estimate of the time left once something is done."""
    ours = [(t, LINE.match(text), text) for t, text in lines if text.startswith(desc)]
    found = [(t, m, text) for t, m, text in ours if m]
    assert len(found) >= 3, [text for _, text in lines][-20:]
    times = [t for t, _, _ in found]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) <= 2.5 * INTERVAL, gaps
    done = [int(m.group("done")) for _, m, _ in found]
    total = int(found[0][1].group("total"))
    assert done == sorted(done) and done[-1] <= total and total > 0
    assert any(" left" in text for _, m, text in found if int(m.group("done")) > 0), found
    assert any(text.startswith(f"{desc}: done, ") for _, _, text in ours) or done[-1] == total
    return [m for _, m, _ in found]


def test_default_interval_is_under_thirty_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV_INTERVAL, raising=False)
    assert 0 < progress.interval_s() < 30
    monkeypatch.setenv(progress.ENV_INTERVAL, "nan")
    assert progress.interval_s() == progress.DEFAULT_INTERVAL_S


def test_bench_prints_progress_lines_in_a_log(slow_sim: SimProcess, tmp_path: Path) -> None:
    code, lines, out = _timed_stderr(
        ["bench", "--base-url", slow_sim.base_url, "--out", str(tmp_path), "--name", "b", "--max-tokens", "48"]
    )
    assert code == 0, lines[-5:]
    found = _assert_steady_lines(lines, "bench")
    assert {m.group("unit") for m in found} == {"requests"}
    assert all("\r" not in text for _, text in lines)  # no bar's carriage returns in a log
    assert "decode tok/s" in out  # the table on standard output (issue #58 item 6), the progress on stderr
    assert not any("decode tok/s" in text for _, text in lines)


def test_capability_prints_progress_lines_in_a_log(data_dir: Path, tmp_path: Path) -> None:
    # One token every 0.25 s: each answer takes seconds, so the run lasts several intervals.
    with start_sim(["--decode-rate", "4", "--data-dir", str(data_dir)]) as sim:
        code, lines, _ = _timed_stderr(
            [
                "capability",
                "--base-url",
                sim.base_url,
                "--out",
                str(tmp_path),
                "--name",
                "c",
                "--thinking",
                "off",
                "--datasets",
                "gsm8k",
                "--limit",
                "4",
                "--concurrency",
                "1",
                "--data-dir",
                str(data_dir),
            ]
        )
    assert code in (0, 1), lines[-5:]
    found = _assert_steady_lines(lines, "capability")
    assert int(found[0].group("total")) == 4


def test_stress_prints_progress_lines_in_a_log(tmp_path: Path) -> None:
    with start_sim(["--profile", "dual-2080ti-before", "--time-scale", "4"]) as sim:
        code, lines, _ = _timed_stderr(
            [
                "stress",
                "--base-url",
                sim.base_url,
                "--out",
                str(tmp_path),
                "--name",
                "s",
                "--cycles",
                "1",
                "--seed",
                "42",
                "--time-scale",
                "4",
            ]
        )
    assert code in (0, 1), lines[-5:]
    _assert_steady_lines(lines, "stress cycle 1/1")
    assert any(text.startswith("cycle 1/1 done") for _, text in lines)


def test_load_prints_progress_lines_within_a_point(slow_sim: SimProcess, tmp_path: Path) -> None:
    code, lines, _ = _timed_stderr(
        [
            "load",
            "--base-url",
            slow_sim.base_url,
            "--out",
            str(tmp_path),
            "--name",
            "l",
            "--no-metrics",
            "--concurrency",
            "2",
            "--requests",
            "8",
            "--prompt-tokens",
            "64",
            "--output-tokens",
            "32",
        ]
    )
    assert code in (0, 1), lines[-5:]
    found = _assert_steady_lines(lines, "load concurrency 2")
    assert int(found[0].group("total")) >= 8


def _on_a_terminal(argv: list[str]) -> str:
    """Run `python -m evalkit ARGV` with standard error a terminal (a pty of 120 columns); what it drew there."""
    env = dict(os.environ, **{progress.ENV_INTERVAL: str(INTERVAL)}, COLUMNS="120")
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a terminal's size
    p = subprocess.Popen(
        [sys.executable, "-m", "evalkit", *argv],
        stdout=subprocess.PIPE,
        stderr=follower,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed its side
                break
            if not chunk:
                break
            seen += chunk
        elif p.poll() is not None:
            break
    os.close(leader)
    assert p.wait(timeout=30) in (0, 1)
    return seen.decode("utf-8", "replace")


def test_bench_draws_a_bar_on_a_terminal(slow_sim: SimProcess, tmp_path: Path) -> None:
    """On a terminal the same command draws tqdm's bar (carriage returns, `|`, the rate) and no log lines."""
    text = _on_a_terminal(
        ["bench", "--base-url", slow_sim.base_url, "--out", str(tmp_path), "--name", "t", "--max-tokens", "16"]
    )
    assert "\r" in text and re.search(r"bench: +\d+%\|", text), text[-500:]
    assert re.search(r"\d+/15 \[", text), text[-500:]  # tqdm's `n/total [elapsed<left, rate]`
    assert " so far" not in text  # no log lines on a terminal


def test_capability_and_load_draw_a_bar_on_a_terminal(slow_sim: SimProcess, data_dir: Path, tmp_path: Path) -> None:
    url = ["--base-url", slow_sim.base_url, "--out", str(tmp_path)]
    text = _on_a_terminal(
        ["capability", *url, "--name", "c", "--thinking", "off", "--datasets", "gsm8k", "--limit", "3"]
        + ["--max-tokens", "16", "--data-dir", str(data_dir)]
    )
    assert re.search(r"capability: +\d+%\|.*\| \d/3 \[", text), text[-500:]
    assert " so far" not in text
    text = _on_a_terminal(
        ["load", *url, "--name", "l", "--no-metrics", "--concurrency", "2", "--requests", "4"]
        + ["--prompt-tokens", "16", "--output-tokens", "8"]
    )
    assert re.search(r"load concurrency 2: +\d+%\|.*\| \d+/\d+ \[", text), text[-500:]
    assert " so far" not in text


SWEEP = """name = "progress"
baseline = "only"

[server]
command = "{python} -m evalkit sim --port {port} --decode-rate 40"
health = "/health"
start_timeout_s = 30

[[point]]
name = "only"

[[run]]
command = "bench"
args = ["--max-tokens", "48", "--no-metrics"]
"""


def test_sweep_says_its_command_still_runs_with_the_commands_own_progress(tmp_path: Path) -> None:
    """A sweep writes each command's output to a file: its own log gets a line at least every interval while the
    command runs, carrying the command's last progress line (done/total, time left)."""
    (tmp_path / "p.toml").write_text(SWEEP)
    code, lines, _ = _timed_stderr(["sweep", str(tmp_path / "p.toml"), "--out", str(tmp_path / "out")])
    assert code == 0, lines[-5:]
    running = [(t, text) for t, text in lines if text.startswith("point only: bench still running, ")]
    assert len(running) >= 3, lines
    times = [lines[0][0]] + [t for t, _ in running] + [next(t for t, x in lines if "bench exit 0" in x)]
    assert max(b - a for a, b in zip(times, times[1:])) <= 2.5 * INTERVAL + 3, times  # + the server's start
    assert any(re.search(r"its last line: bench: \d+/15 requests \(\d+%\), .* left", x) for _, x in running), running


def test_check_prints_progress_lines_in_a_log(tmp_path: Path) -> None:
    """`evalkit check` against a slow server (20 tok/s) passes several intervals: a line each, probes done of the
    expected rows, and a last line with the count it came to (one probe a row of its table)."""
    with start_sim(["--decode-rate", "20"]) as sim:
        code, lines, out = _timed_stderr(["check", "--base-url", sim.base_url, "--out", str(tmp_path)])
    assert code == 0, lines[-5:]
    _assert_steady_lines(lines, "check")
    table = out.splitlines()
    rows = table.index(next(ln for ln in table if ln.startswith("ok: "))) - 2  # less the header and its rule
    done = next(text for _, text in lines if text.startswith("check: done, "))
    m = re.match(r"check: done, (\d+)/\1 probes in ", done)
    assert m and rows - 1 <= int(m.group(1)) <= rows, (done, rows)  # the preflight's own row is not a probe
