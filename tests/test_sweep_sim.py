"""`evalkit sweep` over simulated servers: one slot / two slots x a long prefill that yields / does not, plus a
point whose server refuses its flags. The report's verdicts must match what each point's sim was told to do
(its ground truth), the failed point is recorded and the sweep goes on, a second invocation keeps the finished
points, and `evalkit gate SWEEP_DIR` gates each point against the baseline.

One sweep is shared by the module (stress only, one cycle, the sim at --time-scale 40; about 20 s under load).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "sweeps"

TIME_SCALE = 40
# name -> (slots, yields): the ground truth each sim is started with.
TRUTH = {
    "noyield-1slot": (1, False),
    "noyield-2slots": (2, False),
    "yield-1slot": (1, True),
    "yield-2slots": (2, True),
}
SWEEP = f"""
name = "sim-truth"
baseline = "noyield-1slot"

[server]
command = "{{python}} -m evalkit sim --port {{port}} --max-batch {{slots}} {{yield_flag}} --time-scale {TIME_SCALE}"
start_timeout_s = 30

[reset]
between = "none"

{
    "".join(
        f'''
[[point]]
name = "{name}"
params = {{ slots = {slots}, yield_flag = "{'--yield' if yields else '--no-yield'}" }}
'''
        for name, (slots, yields) in TRUTH.items()
    )
}
[[point]]
name = "broken"
params = {{ slots = 0, yield_flag = "--yield" }}   # the sim refuses --max-batch 0: the server never starts

[[run]]
command = "stress"
# 400-token generations: ~0.1 s each at 40x, so a few ms between the two streams' starts (a loaded box) leaves their
# overlap near 1 or 2 (64 tokens, 16 ms, gave 1.59 once: "can't tell").
args = ["--cycles", "1", "--seed", "7", "--long-tokens", "8000", "--gen-tokens", "400", "--time-scale", "{TIME_SCALE}",
        "--no-progress"]
"""


def evalkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run this interpreter's evalkit CLI."""
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=os.environ
    )


def table_rows(markdown: str, title: str) -> tuple[list[str], dict[str, list[str]]]:
    """A rendered table's column labels and its rows (first cell -> the other cells)."""
    lines = markdown.splitlines()
    start = lines.index(f"### {title}")
    end = next((i for i, ln in enumerate(lines[start + 1 :]) if ln.startswith("### ")), len(lines))
    rows = [ln for ln in lines[start + 1 : start + 1 + end] if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in rows]
    return cells[0][1:], {r[0]: r[1:] for r in cells[2:]}


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sweep run once: its directory, exit code, output and the rendered report."""
    tmp = tmp_path_factory.mktemp("sweep")
    (tmp / "sweep.toml").write_text(SWEEP)
    first = evalkit("sweep", "sweep.toml", "--out", "out", cwd=tmp)
    sweep_dir = tmp / "out" / "sim-truth"
    report = evalkit("report", str(sweep_dir), "-o", str(tmp / "report.md"), cwd=tmp)
    assert report.returncode == 0, report.stderr
    return {"tmp": tmp, "dir": sweep_dir, "first": first, "report": (tmp / "report.md").read_text()}


def test_a_point_that_cannot_start_is_recorded_and_the_sweep_goes_on(swept: dict[str, Any]) -> None:
    """Exit 1 (a point failed); every other point ran; the failure names the start and keeps the log's tail."""
    first = swept["first"]
    assert first.returncode == 1, first.stderr
    assert first.stdout.strip().splitlines()[-1] == str(Path("out") / "sim-truth")
    state = json.loads((swept["dir"] / "sweep-state.json").read_text())
    status = {p["name"]: p for p in state["points"]}
    assert {n: status[n]["status"] for n in TRUTH} == dict.fromkeys(TRUTH, "done")
    broken = status["broken"]
    assert broken["status"] == "failed" and broken["failure"].startswith("did not start"), broken
    assert any("max-batch" in ln for ln in broken["log_tail"]), broken["log_tail"]
    assert "broken: failed: did not start" in first.stdout
    assert "FAILED: did not start" in swept["report"]


def test_each_run_manifest_names_the_server_command_flags_and_identity(swept: dict[str, Any]) -> None:
    """The exact server command, the point's parameters and the server's own identity are in every manifest."""
    for name, (slots, _) in TRUTH.items():
        man = json.loads((swept["dir"] / "points" / name / "stress" / "manifest.json").read_text())
        assert man["build_label"] == name
        assert f"--max-batch {slots}" in man["build"]["server_command"]
        assert man["build"]["param.slots"] == str(slots)
        assert man["server_identity"]["models"] == [{"id": "evalkit-sim"}]  # what the server says about itself
        assert man["server_log"]


def test_report_verdicts_match_each_points_ground_truth(swept: dict[str, Any]) -> None:
    """One column per point, baseline first; head-of-line blocking yes exactly without yielding, two generations
    served together yes exactly with two slots."""
    columns, rows = table_rows(swept["report"], "Diagnoses (stress)")
    assert columns == list(TRUTH)
    points_cols, _ = table_rows(swept["report"], "Points")
    assert points_cols == [*TRUTH, "broken"]
    hol = rows["short request waits out the long prefill (head-of-line blocking) `diagnoses.head_of_line_blocking`"]
    together = rows["two generations served together `diagnoses.concurrency`"]
    for i, (slots, yields) in enumerate(TRUTH.values()):
        assert hol[i].startswith("no" if yields else "yes"), (columns[i], hol[i])
        assert together[i].startswith("yes" if slots == 2 else "no"), (columns[i], together[i])
    _, stress = table_rows(swept["report"], "Latency under a long prefill (stress)")
    waits = [float(c.split()[0]) for c in stress["short_insert_ttft_s p95"]]  # baseline first, deltas against it
    assert all(w < waits[0] / 2 for w in waits[2:]), waits  # the yielding points: a short request waits a chunk


def test_a_second_invocation_keeps_the_finished_points(swept: dict[str, Any]) -> None:
    """Started again, the sweep re-runs only the failed point; finished runs are not touched."""
    lines = swept["dir"] / "points" / "yield-2slots" / "stress" / "requests.jsonl"
    before = lines.read_bytes()
    again = evalkit("sweep", "sweep.toml", "--out", "out", cwd=swept["tmp"])
    assert again.returncode == 1, again.stderr
    for name in TRUTH:
        assert f"point {name}: done earlier, kept" in again.stderr
    assert "point broken: starting" in again.stderr
    assert lines.read_bytes() == before


def test_gate_on_a_sweep_gates_each_point_against_the_baseline(swept: dict[str, Any]) -> None:
    """A rule relative to the baseline point: the yielding points pass, a point that misses the limit by a shortfall
    one stress cycle a side cannot weigh is not decided (never a failure on one sample), a failed point fails its
    gate (exit 1)."""
    rules = swept["tmp"] / "rules.toml"
    rules.write_text('[[rule]]\nmetric = "stress.metrics.short_insert_ttft_s.p95"\nop = "<="\nrelative = 0.5\n')
    gate = evalkit("gate", str(swept["dir"]), "--rules", str(rules), "--junit", "gate.xml", cwd=swept["tmp"])
    assert gate.returncode == 1, gate.stderr
    sections = {s.split(" against ")[0]: s for s in gate.stdout.split("## ")[1:]}
    assert "1 passed" in sections["yield-1slot"] and "1 passed" in sections["yield-2slots"], gate.stdout
    assert "can't tell" in sections["noyield-2slots"] and "1 not decided" in sections["noyield-2slots"], gate.stdout
    assert "FAIL: the point did not run" in sections["broken"], gate.stdout
    assert (swept["tmp"] / "gate.xml").read_text().count("<testsuite ") == 4


def test_dry_run_prints_points_and_commands_and_starts_nothing(tmp_path: Path) -> None:
    """--dry-run: every point with its server command and evalkit commands; no sweep directory."""
    (tmp_path / "sweep.toml").write_text(SWEEP)
    dry = evalkit("sweep", "sweep.toml", "--out", "out", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("\npoint ") + dry.stdout.startswith("point ") == 5
    assert "--max-batch 2 --yield" in dry.stdout and "evalkit stress --base-url" in dry.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.replace('between = "none"', 'between = "sometimes"'), "reset.between"),
        (lambda s: s.replace("start_timeout_s = 30", "start_timeout = 30"), "unknown key 'server.start_timeout'"),
        (lambda s: s.replace("{yield_flag}", "{yield_flags}"), "unknown placeholder {yield_flags}"),
        (lambda s: s.replace('baseline = "noyield-1slot"', 'baseline = "nope"'), "baseline 'nope' is not a point"),
    ],
)
def test_a_bad_sweep_file_is_one_line_and_exit_2(
    tmp_path: Path, edit: Any, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every problem of the sweep file is named in one line, before any server starts."""
    (tmp_path / "sweep.toml").write_text(edit(SWEEP))
    code = main(["sweep", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "out"), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err, err


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.toml") if not p.name.startswith("gate-")))
def test_every_example_sweep_file_is_valid(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The examples in examples/sweeps/ validate and expand: --dry-run prints their points."""
    assert main(["sweep", str(EXAMPLES / example), "--dry-run"]) == 0
    assert capsys.readouterr().out.count("(baseline)") == 1


HALF = f"""
name = "half"
[server]
command = ["{{python}}", "-m", "evalkit", "sim", "--port", "{{port}}", "--time-scale", "{TIME_SCALE}"]
[reset]
between = "http"
calls = [{{ method = "POST", path = "/sim/reset" }}]
[[run]]
command = "bench"
args = ["--runs", "1", "--max-tokens", "16", "--warmup", "0"]
[[run]]
command = "stress"
args = ["--cycles", "6", "--seed", "7", "--long-tokens", "8000", "--time-scale", "{TIME_SCALE}", "--no-progress"]
"""


def test_a_killed_sweep_stops_its_server_and_resumes_the_half_run_point(tmp_path: Path) -> None:
    """SIGTERM during the second command: the sweep stops the point's server (its port closes) and exits 130; started
    again it keeps the finished bench run and resumes the stress run in the same run directory."""
    import re
    import signal
    import socket
    import time

    (tmp_path / "sweep.toml").write_text(HALF)
    cmd = [sys.executable, "-m", "evalkit", "sweep", "sweep.toml", "--out", "out"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = ""
    while "evalkit stress" not in seen:
        line = proc.stderr.readline()
        assert line, seen
        seen += line
    # Inside the stress run: its run directory holds a request (a fixed sleep missed it on a loaded box, both ways).
    stress_dir = tmp_path / "out" / "half" / "points" / "default" / "stress"
    deadline = time.monotonic() + 120
    while not ((stress_dir / "manifest.json").is_file() and (stress_dir / "requests.jsonl").is_file()):
        assert proc.poll() is None and time.monotonic() < deadline, "the stress run never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 130, seen + rest
    port = int(re.search(r"--port (\d+)", seen).group(1))  # type: ignore[union-attr]  # the sweep printed it
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "the point's server still listens"
    state = json.loads((tmp_path / "out" / "half" / "sweep-state.json").read_text())
    assert state["points"][0]["status"] == "running"
    again = evalkit("sweep", "sweep.toml", "--out", "out", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "point default: bench finished earlier, kept" in again.stderr
    manifest = json.loads((tmp_path / "out" / "half" / "points" / "default" / "stress" / "manifest.json").read_text())
    assert manifest["resumes"], manifest  # the cut-off stress run resumed, not started over
    assert json.loads((tmp_path / "out" / "half" / "sweep-state.json").read_text())["points"][0]["status"] == "done"


def test_a_reset_call_the_server_refuses_fails_the_point(tmp_path: Path) -> None:
    """between = "http": a cache-clearing call that does not answer 2xx fails the point, naming the call."""
    bench = '[[run]]\nname = "{}"\ncommand = "bench"\nargs = ["--runs", "1", "--max-tokens", "8", "--warmup", "0"]\n'
    (tmp_path / "sweep.toml").write_text(
        "[server]\n"
        'command = ["{python}", "-m", "evalkit", "sim", "--port", "{port}", "--time-scale", "40"]\n'
        '[reset]\nbetween = "http"\ncalls = [{ method = "POST", path = "/no/such/reset" }]\n'
        + bench.format("first")
        + bench.format("second")
    )
    swept = evalkit("sweep", "sweep.toml", "--out", "out", cwd=tmp_path)
    assert swept.returncode == 1, swept.stderr
    assert "default: failed: reset POST /no/such/reset answered HTTP 404" in swept.stdout, swept.stdout
    assert (tmp_path / "out" / "sweep" / "points" / "default" / "first" / "summary.json").is_file()
