"""`evalkit bench --until-sure` against `evalkit sim` over real HTTP: a steady server is sure after the fewest runs;
a jittery one (`--decode-jitter`, each request's rate drawn around the decode rate) is measured again, up to
--max-runs, and an undecided prompt is named. A median's distribution-free 95% interval needs 6 runs. Runs stay
in the plan's order, so an early stop is a prefix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from evalkit.bench.until_sure import rate_check
from evalkit.sim.launch import start_sim


def bench(tmp: Path, sim_flags: list[str], *flags: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    with start_sim(["--decode-rate", "200", *sim_flags]) as sim:
        p = subprocess.run(
            [sys.executable, "-m", "evalkit", "bench", "--base-url", sim.base_url, "--out", str(tmp), "--name", "b"]
            + ["--max-tokens", "48", "--concurrency", "1", "--until-sure", *flags],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert p.returncode == 0, p.stderr[-2000:]
    run = Path(p.stdout.strip().splitlines()[-1])
    return p, json.loads((run / "summary.json").read_text())


def first_sure(rates: list[float], most: int = 20) -> int:
    """The run after which a prompt is sure by bench's own rule (rate_check, ±1%, 3 runs at least): the first n whose
    first n rates are sure, else `most`. The test checks the runner stopped there."""
    return next((n for n in range(1, most + 1) if rate_check(rates[:n], 0.01, 3).sure), most)


def test_a_steady_server_is_sure_after_the_fewest_runs(tmp_path: Path) -> None:
    """The fewest: 6, the runs a distribution-free 95% interval of a median needs; and never a run more than the
    rates measured call for (a busy machine can make a steady server's rates spread: then it runs on, exactly until
    its first n rates are sure)."""
    p, s = bench(tmp_path, [])
    u = s["until_sure"]
    assert u["decided"] is True and u["undecided"] == [] and u["min_runs"] == 3 and u["max_runs"] == 20
    runs = {name: len(pr["runs"]) for name, pr in s["prompts"].items()}
    print(f"\nsteady: runs {runs}")
    for name, pr in s["prompts"].items():
        assert len(pr["runs"]) == first_sure(pr["runs"]), (name, pr["runs"])
        lo, hi = pr["until_sure"]["interval"]
        assert lo <= pr["tok_s"] <= hi and (hi - lo) / 2 <= 0.01 * pr["tok_s"], pr
    assert min(runs.values()) == 6, runs  # a steady server's prompt is sure after the fewest (a busy run: 6, 6, 12)
    assert "until sure (±1% of the median, 95% interval): decided" in p.stdout
    # the report shows each median's interval and runs; the gate can require a decided run
    run = tmp_path / "b"
    md = tmp_path / "report.md"
    r = subprocess.run(
        [sys.executable, "-m", "evalkit", "report", str(run), "--out", str(md)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-1000:]
    text = md.read_text()
    assert "How sure (bench --until-sure)" in text and "| decided | every median within ±1% |" in text
    code = s["prompts"]["code"]
    lo, hi = code["until_sure"]["interval"]
    assert f"| code | sure: {code['tok_s']:.1f} [{lo:.1f}, {hi:.1f}], n={len(code['runs'])} |" in text
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nmetric = "bench.until_sure.decided"\nop = "=="\nvalue = true\n')
    g = subprocess.run(
        [sys.executable, "-m", "evalkit", "gate", "--rules", str(rules), str(run)], capture_output=True, text=True
    )
    assert g.returncode == 0, g.stdout + g.stderr


def test_a_jittery_server_is_measured_again_and_named_when_unsure(tmp_path: Path) -> None:
    p, s = bench(tmp_path, ["--decode-jitter", "0.08", "--seed", "7"], "--max-runs", "6")
    u = s["until_sure"]
    runs = {name: len(pr["runs"]) for name, pr in s["prompts"].items()}
    print(f"\njittery: runs {runs}; {u}")
    assert all(n == 6 for n in runs.values())  # nothing is sure before its sixth run
    assert u["decided"] is False and u["undecided"]
    assert all(runs[name] == 6 for name in u["undecided"])  # an unsure prompt ran to the most
    lines = [json.loads(x) for x in (tmp_path / "b" / "requests.jsonl").read_text().splitlines()]
    measured = [x["bench_key"] for x in lines if x.get("bench_key")]
    for name, n in runs.items():  # each prompt's runs are 1..n: a prefix of the --max-runs plan
        assert sorted(int(k.rsplit(":", 1)[1]) for k in measured if k.startswith(f"single:{name}:")) == list(
            range(1, n + 1)
        )
    assert "still undecided after 6 runs" in p.stdout
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nmetric = "bench.until_sure.decided"\nop = "=="\nvalue = true\n')
    g = subprocess.run(
        [sys.executable, "-m", "evalkit", "gate", "--rules", str(rules), str(tmp_path / "b")],
        capture_output=True,
        text=True,
    )
    assert g.returncode == 1, g.stdout + g.stderr  # undecided: the gate fails the run
