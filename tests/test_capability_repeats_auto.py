"""`evalkit capability --repeats auto` against `evalkit sim` over real HTTP (accuracy 0.7: a sampled repeat is right
or wrong anew per seed): rounds until each dataset's pass@1 is sure within the margin, each round a line of
repeats_auto.jsonl; at temperature 0 one pass, said so; the interval is conservative (Wilson over all samples)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from evalkit.sim.launch import start_sim
from evalkit_evals.question_scores import QuestionScore
from evalkit_evals.repeats_auto import sampling_interval


def capability(
    tmp: Path, *flags: str, accuracy: str = "0.7", name: str = "c", datasets: str = "gsm8k,math500"
) -> subprocess.CompletedProcess[str]:
    with start_sim(["--time-scale", "1000", "--accuracy", accuracy, "--seed", "1"]) as sim:
        return subprocess.run(
            [sys.executable, "-m", "evalkit", "capability", "--base-url", sim.base_url, "--out", str(tmp)]
            + ["--name", name, "--thinking", "off", "--datasets", datasets, "--limit", "10", *flags],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "EVALKIT_DATA_DIR": os.environ.get("EVALKIT_DATA_DIR", "../shared/datasets")},
        )


def test_rounds_until_each_dataset_is_sure(tmp_path: Path) -> None:
    p = capability(tmp_path, "--repeats", "auto", "--max-repeats", "12", "--margin", "0.1")
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads((tmp_path / "c" / "summary.json").read_text())
    rounds = [json.loads(x) for x in (tmp_path / "c" / "repeats_auto.jsonl").read_text().splitlines()]
    auto = s["repeats_auto"]
    print(f"\nrepeats auto: {auto}")
    assert [r["repeats"] for r in rounds] == list(range(1, len(rounds) + 1))
    assert auto["decided"] is True and rounds[-1]["decided"] is True
    assert not any(r["decided"] for r in rounds[:-1])  # it stopped at the first decided round
    assert 2 <= auto["repeats"] <= 12 and s["repeats"] == auto["repeats"]
    for ds, d in auto["datasets"].items():
        lo, hi = d["interval"]
        assert (hi - lo) / 2 <= 0.1 and lo <= d["pass_at_1"] <= hi, (ds, d)
        assert s["scores"][ds]["samples"] == 10 * auto["repeats"]
    graded = [json.loads(x) for x in (tmp_path / "c" / "graded.jsonl").read_text().splitlines()]
    assert len(graded) == 20 * auto["repeats"]
    assert "repeats auto: after" in p.stderr


def test_at_temperature_zero_one_pass_is_all_there_is(tmp_path: Path) -> None:
    p = capability(tmp_path, "--repeats", "auto", "--temperature", "0")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "one pass is all there is" in p.stderr
    graded = (tmp_path / "c" / "graded.jsonl").read_text().splitlines()
    assert len(graded) == 20


def test_against_a_baseline_it_stops_when_the_comparison_is_decided(tmp_path: Path) -> None:
    """`--baseline RUN_DIR`: a build that answers far worse (sim accuracy 0.05 against 0.7) is decided "worse" beyond
    noise (the paired sign test at 0.05 / the most rounds); the same accuracy is never called better or worse, and
    with a wide enough margin it is decided "equivalent"."""
    base = capability(tmp_path, "--repeats", "6", "--temperature", "0.7", name="base", datasets="gsm8k")
    assert base.returncode == 0, base.stderr[-2000:]
    auto = ["--repeats", "auto", "--max-repeats", "6", "--baseline", str(tmp_path / "base")]
    worse = capability(tmp_path, *auto, accuracy="0.05", name="worse", datasets="gsm8k")
    assert worse.returncode == 0, worse.stderr[-2000:]
    w = json.loads((tmp_path / "worse" / "summary.json").read_text())["repeats_auto"]
    vs = w["datasets"]["gsm8k"]["vs_baseline"]
    print(f"\nworse build: after {w['repeats']} rounds {vs}")
    assert w["decided"] is True and vs["verdict"] == "worse" and vs["p"] < vs["level"] == 0.05 / 6, vs
    assert w["baseline"] == str((tmp_path / "base").resolve()) and "vs baseline: worse" in worse.stderr
    same = capability(tmp_path, *auto, "--margin", "0.35", name="same", datasets="gsm8k")
    assert same.returncode == 0, same.stderr[-2000:]
    rounds = [json.loads(x) for x in (tmp_path / "same" / "repeats_auto.jsonl").read_text().splitlines()]
    print(f"same build: {[r['datasets']['gsm8k']['vs_baseline'] for r in rounds]}")
    assert all(r["datasets"]["gsm8k"]["vs_baseline"]["verdict"] in ("equivalent", "undecided") for r in rounds)
    assert rounds[-1]["decided"] is True and rounds[-1]["datasets"]["gsm8k"]["vs_baseline"]["verdict"] == "equivalent"


def test_a_baseline_that_is_no_capability_run_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notarun").mkdir()
    p = capability(tmp_path, "--repeats", "auto", "--baseline", str(tmp_path / "notarun"))
    assert p.returncode == 2 and "no manifest.json" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    p = capability(tmp_path, "--repeats", "3", "--baseline", str(tmp_path / "notarun"))
    assert p.returncode == 2 and "--baseline needs --repeats auto" in p.stderr, p.stderr


def test_the_interval_is_conservative() -> None:
    """Questions of unequal difficulty (p 0.1 .. 0.9): the Wilson interval over all samples is at least as wide as
    the true sampling spread of pass@1, so it holds the truth at least 95% of the time over seeded draws."""
    import random

    rng = random.Random(3)
    ps = [0.1 + 0.8 * i / 19 for i in range(20)]
    truth = sum(ps) / len(ps)
    held = 0
    for _ in range(400):
        scores = [
            QuestionScore(f"q{i}", "d", tuple("correct" if rng.random() < p else "wrong" for _ in range(4)), ())
            for i, p in enumerate(ps)
        ]
        ci = sampling_interval(scores)
        assert ci is not None
        held += ci[0] <= truth <= ci[1]
    assert held >= 0.95 * 400, held
