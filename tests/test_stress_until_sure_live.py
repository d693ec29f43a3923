"""`evalkit stress --until-sure` against `evalkit sim` over real HTTP (the write-up's builds at --time-scale 20, the
sim's log followed): the before build decides every verdict after 4 cycles (one cancel a cycle needs 4 agreeing
samples) and its median figure (combined tok/s) after 6 (a distribution-free interval of a median needs 6 samples),
and stops there, complete, a prefix of the --max-cycles schedule; the after build, whose inserted short lands
anywhere in a prefill chunk, is not sure of its short-insert p95 within ±2% after 4 cycles and says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit.sim.launch import start_sim
from evalkit_stress.scenario_file import builtin_scenarios
from evalkit_stress.schedule import build_schedule

SCALE = "20"
LONG = 54000


def stress(base_url: str, out: Path, name: str, log: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "evalkit", "stress", "--base-url", base_url, "--out", str(out), "--name", name]
    cmd += ["--no-progress", "--seed", "42", "--time-scale", SCALE, "--long-tokens", str(LONG)]
    return subprocess.run([*cmd, "--server-log", str(log), *flags], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("until-sure")
    got: dict[str, Any] = {}
    for profile, flags in (
        ("dual-2080ti-before", ["--until-sure", "--max-cycles", "8"]),
        ("dual-2080ti-after", ["--until-sure", "--max-cycles", "4", "--margin", "0.02"]),
    ):
        log = out / f"{profile}.log"
        with start_sim(["--profile", profile, "--time-scale", SCALE, "--server-log-file", str(log)]) as sim:
            p = stress(sim.base_url, out, profile, log, *flags)
            assert p.returncode == 0, p.stderr[-2000:]
            again = stress(sim.base_url, out, profile, log, *flags)
        run = Path(p.stdout.strip().splitlines()[-1])
        got[profile] = {
            "run": run,
            "p": p,
            "again": again,
            "summary": json.loads((run / "summary.json").read_text()),
            "lines": [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()],
            "decisions": [json.loads(x) for x in (run / "until_sure.jsonl").read_text().splitlines()],
        }
    return got


def test_the_before_build_stops_once_decided(runs: dict[str, Any]) -> None:
    r = runs["dual-2080ti-before"]
    s, u = r["summary"], r["summary"]["until_sure"]
    print(f"\nbefore build: {u['cycles']} cycles; checks {[(c['name'], c['value'], c['why']) for c in u['checks']]}")
    assert s["stopped"] == "decided" and s["partial"] is False
    assert u["decided"] is True and u["stopped_early"] is True and u["undecided"] == []
    assert s["cycles"] == u["cycles"] == 6 and s["cycles_planned"] == 8
    # one decision a cycle; nothing decided before the third; the verdicts after the fourth, the median after the
    # sixth
    assert [d["cycles"] for d in r["decisions"]] == [1, 2, 3, 4, 5, 6]
    assert [d["decided"] for d in r["decisions"]] == [False] * 5 + [True]
    fourth = {c["name"]: c for c in r["decisions"][3]["checks"]}
    assert all(c["decided"] for c in fourth.values() if c["what"] == "verdict"), fourth
    assert not fourth["concurrent_combined_tok_s p50"]["decided"]
    assert "needs 6" in fourth["concurrent_combined_tok_s p50"]["why"]
    names = {c["name"] for c in u["checks"]}
    assert {"short_insert_ttft_s p95", "post_cancel_ttft_s max", "head_of_line_blocking", "cancel_aborts"} <= names
    verdicts = {c["name"]: c["value"] for c in u["checks"] if c["what"] == "verdict"}
    assert verdicts["head_of_line_blocking"] == "yes" and verdicts["cancel_aborts"] == "no"
    assert verdicts["effective_concurrency"] == 1
    assert "until sure: decided after 6 of at most 8 cycles" in r["p"].stdout


def test_an_early_stop_is_a_prefix_of_the_full_schedule(runs: dict[str, Any]) -> None:
    r = runs["dual-2080ti-before"]
    manifest = json.loads((r["run"] / "manifest.json").read_text())
    full = build_schedule(42, 8, LONG, False, False, 512, builtin_scenarios(), manifest["stress"]["prompt_salt"])
    planned = [(q.plan_id, q.expected) for c in range(1, 7) for sc in full.cycle(c) for q in sc.requests]
    sent = [(x["plan_id"], x["expected"]) for x in r["lines"] if x.get("scenario") != "calibration"]
    assert sorted(sent) == sorted(planned)


def test_a_decided_run_started_again_measures_nothing(runs: dict[str, Any]) -> None:
    r = runs["dual-2080ti-before"]
    assert r["again"].returncode == 0, r["again"].stderr[-1000:]
    assert len((r["run"] / "requests.jsonl").read_text().splitlines()) == len(r["lines"])
    assert "until sure: decided after 6" in r["again"].stdout


def test_an_undecided_run_names_what_is_still_unsure(runs: dict[str, Any]) -> None:
    r = runs["dual-2080ti-after"]
    s, u = r["summary"], r["summary"]["until_sure"]
    print(f"\nafter build: {[(c['name'], c['why']) for c in u['checks'] if not c['decided']]}")
    assert s["stopped"] == "completed" and s["cycles"] == 4 and u["decided"] is False
    assert "short_insert_ttft_s p95" in u["undecided"]
    assert "until sure: still undecided after 4 of at most 4 cycles" in r["p"].stdout
    assert "short_insert_ttft_s p95" in r["p"].stdout


def test_the_gate_can_require_a_decided_run(runs: dict[str, Any], tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nmetric = "stress.until_sure.decided"\nop = "=="\nvalue = true\n')
    got = {}
    for profile in ("dual-2080ti-before", "dual-2080ti-after"):
        p = subprocess.run(
            [sys.executable, "-m", "evalkit", "gate", "--rules", str(rules), str(runs[profile]["run"])],
            capture_output=True,
            text=True,
            timeout=60,
        )
        got[profile] = p.returncode
    assert got == {"dual-2080ti-before": 0, "dual-2080ti-after": 1}
    rules.write_text('[[rule]]\nmetric = "stress.until_sure.decided"\nop = "<="\nvalue = true\n')
    p = subprocess.run(
        [sys.executable, "-m", "evalkit", "gate", "--rules", str(rules), str(runs["dual-2080ti-before"]["run"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "compares only with op == or !=" in p.stderr


def test_the_report_says_how_sure(runs: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    p = subprocess.run(
        [sys.executable, "-m", "evalkit", "report", "--labels", "before,after"]
        + [str(runs[k]["run"]) for k in ("dual-2080ti-before", "dual-2080ti-after")]
        + ["--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-1000:]
    md = out.read_text()
    assert "How sure (stress --until-sure)" in md
    row = next(x for x in md.splitlines() if x.startswith("| decided |"))
    assert "after 6 of at most 8 cycles" in row and "still undecided after 4 of at most 4 cycles" in row
    sip = next(x for x in md.splitlines() if x.startswith("| `short_insert_ttft_s p95` |"))
    assert "decided: " in sip and "undecided: " in sip and "n=4" in sip


@pytest.mark.parametrize("seed", ["1", "7"])
def test_the_before_build_decides_after_six_cycles_on_other_seeds(tmp_path: Path, seed: str) -> None:
    """The stopping rule on a few seeds: the before build's verdicts (one cancel a cycle) need 4 agreeing cycles, its
    median figure 6 samples."""
    log = tmp_path / "sim.log"
    with start_sim(["--profile", "dual-2080ti-before", "--time-scale", SCALE, "--server-log-file", str(log)]) as sim:
        cmd = [sys.executable, "-m", "evalkit", "stress", "--base-url", sim.base_url, "--out", str(tmp_path)]
        cmd += ["--name", "s", "--no-progress", "--seed", seed, "--time-scale", SCALE, "--long-tokens", str(LONG)]
        cmd += ["--server-log", str(log), "--until-sure", "--max-cycles", "7"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    u = json.loads((tmp_path / "s" / "summary.json").read_text())["until_sure"]
    verdicts = {c["name"]: c["value"] for c in u["checks"] if c["what"] == "verdict"}
    assert u["decided"] is True and u["cycles"] == 6, u
    assert verdicts["head_of_line_blocking"] == "yes" and verdicts["cancel_aborts"] == "no"
    assert verdicts["effective_concurrency"] == 1
