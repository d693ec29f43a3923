"""`evalkit capability --under-load` over real HTTP (issue 31 item 1): against the sim's degrade-under-batch profile
the planted drop is beyond noise, equal to the sim's own record of which answers it spoilt, and the gate fails it;
against a clean sim the same run is within noise and the gate passes. Bad load specs exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.cli import main
from evalkit.sim.launch import start_sim

LOAD = "concurrency=2,prompt_tokens=100,output_tokens=100,warmup_s=0.2"
RULES = """
[[rule]]
name = "no worse under load beyond noise"
metric = "capability.under_load.no_worse_beyond_noise"
op = "=="
value = 1
"""


def capability(base_url: str, out: Path, name: str, data_dir: Path, *extra: str) -> Path:
    cmd = [sys.executable, "-m", "evalkit", "capability", "--base-url", base_url, "--out", str(out), "--name", name]
    cmd += ["--no-metrics", "--thinking", "off", "--datasets", "gsm8k", "--limit", "30", "--data-dir", str(data_dir)]
    r = subprocess.run([*cmd, "--under-load", LOAD, *extra], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "under load (" in r.stdout
    return Path(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[dict[str, Any]]:
    """A degrade-under-batch sim and a clean one, each with its run and its /sim/events."""
    out = tmp_path_factory.mktemp("under-load")
    got: dict[str, Any] = {}
    for name, flags in (("degraded", ["--profile", "degrade-under-batch"]), ("clean", [])):
        sim = start_sim([*flags, "--time-scale", "50", "--data-dir", str(data_dir)])
        try:
            run = capability(sim.base_url, out, name, data_dir)
            got[name] = (run, sim.events())
        finally:
            sim.stop()
    yield got


def summary(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text())


def gate(run: Path, tmp_path: Path) -> int:
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    return subprocess.run(
        [sys.executable, "-m", "evalkit", "gate", str(run), "--rules", str(rules)], capture_output=True, text=True
    ).returncode


def test_planted_drop_is_beyond_noise_and_is_the_sims_truth(runs: dict[str, Any], tmp_path: Path) -> None:
    run, events = runs["degraded"]
    u = summary(run)["under_load"]
    loaded = {json.loads(x)["request_id"]: json.loads(x)["id"] for x in (run / "graded.jsonl").read_text().splitlines()}
    spoilt = sorted(loaded[e["request_id"]] for e in events if e["request_id"] in loaded and e["fault"])
    assert spoilt, "the background load never shared a batch with a graded question"
    assert u["lost"] == spoilt and u["gained"] == []
    assert u["idle"] == {"correct": 30, "total": 30} and u["loaded"]["correct"] == 30 - len(spoilt)
    assert u["worse_beyond_noise"] and not u["no_worse_beyond_noise"] and u["mcnemar"]["mark"] == "▼"
    assert u["changed_text"] == len(spoilt) and u["changed_text_share"] == pytest.approx(len(spoilt) / 30)
    bg = u["background"]
    assert bg["requests"] > 0 and bg["errors"] == 0 and bg["wrong_answers"] == 0
    assert bg["foreground_overlapped_share"] == 1.0 and bg["mean_in_flight"] > 0.5
    # The idle pass saw nothing else at the server: no graded idle answer was spoilt.
    idle_ids = {json.loads(x)["request_id"] for x in (run / "graded-idle.jsonl").read_text().splitlines()}
    assert not [e for e in events if e["request_id"] in idle_ids and e["fault"]]
    assert summary(run)["total"]["correct"] == 30 - len(spoilt)  # the run's scores are the loaded pass's
    assert gate(run, tmp_path) == 1


def test_clean_server_is_within_noise(runs: dict[str, Any], tmp_path: Path) -> None:
    run, _ = runs["clean"]
    u = summary(run)["under_load"]
    assert u["lost"] == [] and u["gained"] == [] and u["changed_text"] == 0
    assert u["mcnemar"]["mark"] == "≈" and u["no_worse_beyond_noise"]
    assert u["background"]["requests"] > 0 and u["background"]["foreground_overlapped_share"] == 1.0
    assert gate(run, tmp_path) == 0


def test_idle_answers_from_an_earlier_run(runs: dict[str, Any], tmp_path: Path, data_dir: Path) -> None:
    sim = start_sim(["--profile", "degrade-under-batch", "--time-scale", "50", "--data-dir", str(data_dir)])
    try:
        run = capability(sim.base_url, tmp_path, "vs-clean", data_dir, "--idle-run", str(runs["clean"][0]))
        events = sim.events()
    finally:
        sim.stop()
    u = summary(run)["under_load"]
    assert u["idle_source"] == str(runs["clean"][0]) and not (run / "graded-idle.jsonl").exists()
    spoilt = [e for e in events if e["fault"]]
    assert len(u["lost"]) == len(spoilt) > 0 and u["idle"]["correct"] == 30
    assert sum(1 for e in events if e["kind"] == "capability") == 30  # only the loaded pass was asked


def test_trace_as_the_background_load(tmp_path: Path, data_dir: Path) -> None:
    trace = Path(__file__).resolve().parent.parent / "examples" / "traces" / "synthetic-mooncake.jsonl"
    sim = start_sim(["--time-scale", "50", "--data-dir", str(data_dir)])
    try:
        cmd = [sys.executable, "-m", "evalkit", "capability", "--base-url", sim.base_url, "--out", str(tmp_path)]
        cmd += [
            "--no-metrics",
            "--thinking",
            "off",
            "--datasets",
            "gsm8k",
            "--limit",
            "10",
            "--data-dir",
            str(data_dir),
        ]
        load = f"trace={trace},speedup=20,warmup_s=0.2"
        r = subprocess.run([*cmd, "--name", "trace", "--under-load", load], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
    finally:
        sim.stop()
    u = summary(Path(r.stdout.strip().splitlines()[-1]))["under_load"]
    assert u["load"]["trace"] == str(trace) and u["load"]["speedup"] == 20
    bg = u["background"]
    assert bg["requests"] > 0 and bg["errors"] == 0 and bg["wrong_answers"] == 0
    # A trace has quiet spells: a graded question may run in one (the share says so), most do not.
    assert bg["foreground_overlapped_share"] >= 0.5 and u["lost"] == [] and u["no_worse_beyond_noise"]


@pytest.mark.parametrize(
    "flags", [["--idle-run", "."], ["--under-load", "concurrency=1", "--idle-run", "/nonexistent"]]
)
def test_idle_run_misuse_exits_2(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capability", "--thinking", "off", *flags, "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "--idle-run" in capsys.readouterr().err


@pytest.mark.parametrize(
    "load",
    ["rate=0", "concurrency=2,rate=1", "speed=3", "concurrency", "concurrency=1.5", "trace.jsonl", "missing.toml"],
)
def test_bad_load_spec_exits_2(load: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["capability", "--thinking", "off", "--under-load", load, "--base-url", "http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "--under-load" in err, err


def test_load_spec_from_toml(tmp_path: Path) -> None:
    from evalkit.load.load_spec import parse_load_spec

    f = tmp_path / "load.toml"
    f.write_text('[load]\nrate = 2.5\narrivals = "gamma"\nburstiness = 0.5\nmax_prefill = 2\n')
    s = parse_load_spec(str(f))
    assert (s.mode, s.load, s.arrivals, s.burstiness, s.max_prefill) == ("rate", 2.5, "gamma", 0.5, 2)
    assert parse_load_spec("concurrency=3, output_tokens=10:20").workload().output_tokens.hi == 20
    example = Path(__file__).resolve().parent.parent / "examples" / "under-load.toml"
    assert parse_load_spec(str(example)).max_concurrency == 8


def test_report_shows_answers_under_load(runs: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    cmd = [sys.executable, "-m", "evalkit", "report", str(runs["degraded"][0]), str(runs["clean"][0]), "-o", str(out)]
    r = subprocess.run([*cmd, "--labels", "degraded,clean"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    text = out.read_text()
    assert "Answers under load" in text
    row = next(x for x in text.splitlines() if x.startswith("| degraded") and "under load" not in x and "▼" in x)
    lost = len(summary(runs["degraded"][0])["under_load"]["lost"])
    assert f"{30 - lost}/30 ▼" in row and f"{lost} / 0" in row
    assert any(x.startswith("| clean") and "30/30 ≈" in x for x in text.splitlines())
