"""`evalkit sweep` with `[interleave]`: two builds (two simulated servers) measured in alternating rounds, each
round's order drawn from the file's seed, compared round by round with the paired signed-rank test.

Two sweeps over real HTTP: a planted decode-rate difference (100 against 130 tok/s) that the paired comparison calls
better in the report and the gate passes, and two identical sims that it does not call different and whose gate does
not fail. Each round is one bench run of one prompt (256 tokens, one stream) against a fresh sim at 4x: its 0.64 s
decode keeps the client's timing noise near half a percent, well under the 2% noise floor (at 10x, 128 tokens, three
prompts, a round's ratio of identical sims wandered by 3-4% on a loaded 2-core box, beyond the floor: the test would
then rely on the 5% level alone). About 1.5 minutes for both sweeps on an idle machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit.sweep.rounds import round_order

TIME_SCALE = 4
PROMPTS = '[[prompt]]\nname = "code"\ntext = "Write a Python function that merges two sorted lists."\n'


def sweep_text(name: str, after_rate: int, rounds: int, seed: int = 11) -> str:
    """An interleaved sweep of two sims: `before` decodes at 100 tok/s, `after` at `after_rate` (the bench prompt in
    prompts.toml beside the sweep file, which `--set prompts=PATH` names)."""
    return f"""
name = "{name}"
baseline = "before"

[vars]
prompts = "prompts.toml"

[server]
command = "{{python}} -m evalkit sim --port {{port}} --decode-rate {{rate}} --time-scale {TIME_SCALE}"
start_timeout_s = 60

[interleave]
rounds = {rounds}
seed = {seed}

[[point]]
name = "before"
params = {{ rate = 100 }}

[[point]]
name = "after"
params = {{ rate = {after_rate} }}

[[run]]
command = "bench"
args = ["--runs", "1", "--max-tokens", "256", "--concurrency", "1", "--prompts", "{{prompts}}"]
"""


RULES = """
[[rule]]
name = "decode no slower than the baseline's"
metric = "bench.prompts.code.tok_s"
op = ">="
relative = 0.97

[[rule]]
name = "no request failed"
metric = "bench.prompts.code.failed"
op = "=="
value = 0
"""


def evalkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run this interpreter's evalkit CLI."""
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=os.environ
    )


def swept(tmp: Path, name: str, after_rate: int, rounds: int) -> dict[str, Any]:
    """Run an interleaved sweep, its report and its gate."""
    (tmp / f"{name}.toml").write_text(sweep_text(name, after_rate, rounds))
    (tmp / "rules.toml").write_text(RULES)
    (tmp / "prompts.toml").write_text(PROMPTS)
    run = evalkit("sweep", f"{name}.toml", "--out", "out", cwd=tmp)
    assert run.returncode == 0, run.stderr
    sweep_dir = tmp / "out" / name
    report = evalkit("report", str(sweep_dir), "-o", str(tmp / f"{name}.md"), "--no-html", cwd=tmp)
    assert report.returncode == 0, report.stderr
    gate = evalkit("gate", str(sweep_dir), "--rules", "rules.toml", cwd=tmp)
    return {"tmp": tmp, "dir": sweep_dir, "run": run, "report": (tmp / f"{name}.md").read_text(), "gate": gate}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return swept(tmp_path_factory.mktemp("planted"), "planted", 130, 6)


@pytest.fixture(scope="module")
def identical(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return swept(tmp_path_factory.mktemp("identical"), "identical", 100, 6)


def paired_row(report: str, figure: str) -> list[str]:
    """The cells of one figure's row in the report's paired table."""
    lines = report.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("### after against before, paired"))
    for ln in lines[start:]:
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if cells[0] == figure:
            return cells[1:]
    raise AssertionError(f"no row {figure!r} in the paired table")


def test_the_order_is_drawn_per_round_and_reproduced_by_its_seed() -> None:
    """Each round's order from the seed: the same seed gives the same plan, both orders occur, and a longer plan
    with the same seed begins with the shorter one (so added rounds keep the order of the rounds done)."""
    plan = round_order(["before", "after"], 12, seed=11)
    assert plan == round_order(["before", "after"], 12, seed=11)
    assert {tuple(o) for o in plan} == {("before", "after"), ("after", "before")}
    assert round_order(["before", "after"], 20, seed=11)[:12] == plan
    assert any(round_order(["before", "after"], 12, seed=s) != plan for s in range(12, 15))


def test_the_rounds_alternate_in_the_drawn_order_over_real_servers(planted: dict[str, Any]) -> None:
    """Every round ran both points in the order the seed drew (the sweep's output and the run directories' start
    times agree), each against its own fresh server, and the state records the plan."""
    state = json.loads((planted["dir"] / "sweep-state.json").read_text())
    order = state["interleave"]["order"]
    assert order == round_order(["before", "after"], 6, seed=11)
    assert {p["name"]: p["status"] for p in state["points"]} == {"before": "done", "after": "done"}
    for r, (first, second) in enumerate(order, 1):
        tag = f"round-{r:02d}"
        assert f"round {r} of 6: {first} then {second}" in planted["run"].stderr
        started = {
            p: json.loads((planted["dir"] / "points" / p / tag / "bench" / "manifest.json").read_text())
            for p in (first, second)
        }
        assert started[first]["started"] < started[second]["started"], (tag, first, second)
        assert started[first]["build"]["sweep_round"] == tag
    servers = {ln.split("--port ")[1].split()[0] for ln in planted["run"].stderr.splitlines() if ": starting " in ln}
    assert len(servers) == 12  # a fresh server (a new port) for every point in every round


def test_a_planted_decode_difference_is_called_better_paired(planted: dict[str, Any]) -> None:
    """after decodes 30% faster: ▲ in every round's ratio, called by the signed-rank test over 6 rounds, and the
    report says the comparison was paired."""
    before, after, change, how = paired_row(planted["report"], "bench: code decode tok/s")
    assert change.startswith("▲"), (change, how)
    assert 1.2 < float(after) / float(before) < 1.4, (before, after)
    assert how.startswith("paired over 6 rounds (signed-rank)"), how
    assert "The comparison was paired" in planted["report"]
    assert "round-01 (before first)" in planted["report"] or "round-01 (after first)" in planted["report"]
    assert planted["gate"].returncode == 0, planted["gate"].stdout + planted["gate"].stderr
    assert "paired over 6 rounds: the medians meet it" in planted["gate"].stdout


def test_the_gate_fails_a_limit_missed_beyond_noise_round_by_round(planted: dict[str, Any]) -> None:
    """A rule the faster build misses (decode no faster than the baseline's): every round's value is past that
    round's limit, so the paired test calls the shortfall beyond noise and the gate fails (exit 1), saying how."""
    tmp = planted["tmp"]
    (tmp / "reversed.toml").write_text('[[rule]]\nmetric = "bench.prompts.code.tok_s"\nop = "<="\nrelative = 1.0\n')
    gate = evalkit("gate", str(planted["dir"]), "--rules", "reversed.toml", "--junit", "gate.xml", cwd=tmp)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "short of the limit beyond noise, paired over 6 rounds (signed-rank)" in gate.stdout, gate.stdout
    assert "0 of 1 points passed; failed: after" in gate.stdout
    assert '<failure message="value' in (tmp / "gate.xml").read_text()


def test_too_few_rounds_to_tell_a_miss_from_noise_is_not_decided(planted: dict[str, Any], tmp_path: Path) -> None:
    """The same sweep cut to its first 3 rounds (as if the file had said rounds = 3): the missed rule cannot be
    weighed (the signed-rank test needs 6 rounds to reach 5%), so it is not decided: exit 3, never 1; the report
    says can't tell."""
    import shutil

    cut = tmp_path / "cut"
    shutil.copytree(planted["dir"], cut)
    state = json.loads((cut / "sweep-state.json").read_text())
    state["interleave"]["rounds"], state["interleave"]["order"] = 3, state["interleave"]["order"][:3]
    (cut / "sweep-state.json").write_text(json.dumps(state))
    (tmp_path / "reversed.toml").write_text(
        '[[rule]]\nmetric = "bench.prompts.code.tok_s"\nop = "<="\nrelative = 1.0\n'
    )
    gate = evalkit("gate", str(cut), "--rules", "reversed.toml", cwd=tmp_path)
    assert gate.returncode == 3, gate.stdout + gate.stderr
    assert "can't tell, 3 paired round(s): a signed-rank test needs 6" in gate.stdout, gate.stdout
    assert "not decided: after" in gate.stdout
    report = evalkit("report", str(cut), "-o", str(tmp_path / "cut.md"), "--no-html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    _, _, change, how = paired_row((tmp_path / "cut.md").read_text(), "bench: code decode tok/s")
    assert change.startswith("?") and how.startswith("paired over 3 rounds (signed-rank): can't tell"), how


def test_identical_sims_are_never_called_different_and_their_gate_passes(identical: dict[str, Any]) -> None:
    """The same sim at both points: no figure beyond noise over 6 paired rounds, and the gate's relative rule holds
    (exit 0)."""
    before, after, change, how = paired_row(identical["report"], "bench: code decode tok/s")
    assert change.startswith("≈"), (before, after, change, how)
    assert how.startswith("paired over 6 rounds (signed-rank)"), how
    gate = identical["gate"]
    assert gate.returncode == 0, gate.stdout + gate.stderr


def test_more_rounds_in_the_file_add_rounds_and_keep_the_rounds_done(planted: dict[str, Any]) -> None:
    """Started again with 7 rounds: rounds 1-6 are kept as they are (no server started for them), round 7 runs in
    the order the same seed gives it."""
    tmp = planted["tmp"]
    kept = (planted["dir"] / "points" / "after" / "round-03" / "bench" / "requests.jsonl").read_bytes()
    (tmp / "planted.toml").write_text(sweep_text("planted", 130, 7))
    again = evalkit("sweep", "planted.toml", "--out", "out", cwd=tmp)
    assert again.returncode == 0, again.stderr
    for r in range(1, 7):
        for p in ("before", "after"):
            assert f"point {p} round-{r:02d}: round-{r:02d}/bench finished earlier, kept" in again.stderr
    assert again.stderr.count(": starting ") == 2
    state = json.loads((planted["dir"] / "sweep-state.json").read_text())
    assert state["interleave"]["order"] == round_order(["before", "after"], 7, seed=11)
    assert (planted["dir"] / "points" / "after" / "round-03" / "bench" / "requests.jsonl").read_bytes() == kept
    assert (planted["dir"] / "points" / "before" / "round-07" / "bench" / "summary.json").is_file()


def test_interleave_takes_two_points(tmp_path: Path) -> None:
    """A third point, or a changed seed on a sweep directory already run, is one line and exit 2."""
    text = sweep_text("three", 130, 6) + '\n[[point]]\nname = "third"\nparams = { rate = 90 }\n'
    (tmp_path / "three.toml").write_text(text)
    p = evalkit("sweep", "three.toml", "--dry-run", cwd=tmp_path)
    assert p.returncode == 2 and "[interleave] alternates two points" in p.stderr, p.stderr
    (tmp_path / "two.toml").write_text(sweep_text("two", 130, 6))
    dry = evalkit("sweep", "two.toml", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    for r, (first, second) in enumerate(round_order(["before", "after"], 6, seed=11), 1):
        assert f"round {r}: {first} then {second}" in dry.stdout
