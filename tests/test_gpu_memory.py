"""Per-card GPU memory over real HTTP: `evalkit stress` against `evalkit sim` with the `nvidia-smi` stand-in.

Issue 34's stand-in: card 0 grows 400 MiB a second from 8,000 MiB and card 1 stays flat, `--cycles 3 --time-scale
50 --gpu-interval 0.2` against `dual-2080ti-after` (with shorter long prompts here): card 0 must be named every
run, card 1 never (two runs here; `benchmarks/check_gpu_leak_verdict.py` runs ten). A 4-cycle run has one card of
each other form: 200 MiB per finished request (named with a per-request slope within 20% of 200), 120 MiB per cycle,
flat with ±50 MiB of sampling noise, and flat: the last two never named. The statistics
themselves (autocorrelated samples, a noisy flat card drawn many times, "can't tell") are tested on synthetic
samples below.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit.cli import main
from evalkit.evidence.gpu_memory import QUERY, leak_verdict, parse_query, summarize_gpu
from evalkit.evidence.gpu_slopes import fit_slope
from evalkit.runs.rundir import read_jsonl
from evalkit.sim.launch import start_sim
from fake_nvidia_smi import FakeCard, install

NAME = "NVIDIA GeForce RTX 2080 Ti"
ISSUE = [FakeCard(0, base_mib=8000, mib_per_second=400), FakeCard(1, base_mib=8000)]
FORMS = [
    FakeCard(0, base_mib=3000, mib_per_request=200),
    FakeCard(1, base_mib=3000, mib_per_cycle=120),
    FakeCard(2, base_mib=8000, noise_mib=50),
    FakeCard(3, base_mib=2500),
]
FLAT = FakeCard(1, base_mib=2500)


# The issue's flags, with long prompts of 30,000 tokens (54,000 in the issue): cycles of ~2 s, ~10 samples each.
SCALE, INTERVAL, LONG_TOKENS = "50", "0.2", "30000"


def stress(tmp: Path, name: str, cards: list[FakeCard], seed: int, cycles: int) -> tuple[Path, str]:
    """One stress run with the stand-in on the PATH; returns (run dir, stdout)."""
    bindir = tmp / f"bin-{name}"
    with start_sim(["--profile", "dual-2080ti-after", "--time-scale", SCALE]) as sim:
        install(bindir, cards, sim.root_url + "/sim/events", tmp / name / "requests.jsonl", seed=seed)
        env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalkit",
                "stress",
                "--base-url",
                sim.base_url,
                "--out",
                str(tmp),
                "--name",
                name,
                "--no-progress",
                "--cycles",
                str(cycles),
                "--seed",
                str(seed),
                "--long-tokens",
                LONG_TOKENS,
                "--time-scale",
                SCALE,
                "--gen-tokens",
                "64",
                "--gpu-interval",
                INTERVAL,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
    assert p.returncode == 0, p.stderr[-2000:]
    return Path(p.stdout.strip().splitlines()[-1]), p.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    tmp = tmp_path_factory.mktemp("gpu")
    out = {}
    # Four cycles for the forms: three exact cycle peaks leave one degree of freedom, too few to name a slope by.
    plans = (("issue-a", ISSUE, 1, 3), ("issue-b", ISSUE, 2, 3), ("forms", FORMS, 3, 4))
    # The three runs at once, each with its own sim and stand-in (the stand-in's growth is per wall second, so a
    # shared box bends no slope): about a third of the time of one after another.
    with ThreadPoolExecutor(max_workers=len(plans)) as pool:
        done = {name: pool.submit(stress, tmp, name, cards, seed, cycles) for name, cards, seed, cycles in plans}
    for name, future in done.items():
        run, stdout = future.result()
        out[name] = {"run": run, "stdout": stdout, "summary": json.loads((run / "summary.json").read_text())}
    return out


@pytest.mark.parametrize("name", ["issue-a", "issue-b"])
def test_card_growing_with_time_is_named_and_the_flat_card_is_not(runs: dict[str, Any], name: str) -> None:
    s = runs[name]["summary"]
    gpu, verdict = s["gpu_memory"], s["gpu_memory_verdict"]
    assert (gpu["0"]["verdict"], gpu["1"]["verdict"]) == ("growing", "flat")
    assert (verdict["leak_suspected_on"], verdict["cards_growing"], verdict["cards"]) == ([0], 1, 2)
    # The stand-in grows 400 MiB a wall second and the sampler stamps wall seconds.
    assert gpu["0"]["leak_by"][0] == "second" and abs(gpu["0"]["slope_mib_per_second"] - 400) <= 80, gpu["0"]
    assert gpu["0"]["slope_noise_mib_per_second"] < gpu["0"]["slope_mib_per_second"]
    assert gpu["1"]["slope_mib_per_second"] == 0 and gpu["1"]["range_mib"] == 0 and gpu["1"]["peak_mib"] == 8000
    assert verdict["verdict"].startswith(f"possible leak on GPU 0 ({NAME}): +")
    assert " MiB per second" in verdict["verdict"] and verdict["verdict"].endswith("; GPU 1 flat")
    assert "GPU memory: possible leak on GPU 0 (" in runs[name]["stdout"]
    samples = [x for x in read_jsonl(runs[name]["run"] / "gpu_memory.jsonl") if x["gpu"] == 0]
    assert gpu["0"]["peak_mib"] == max(x["used_mib"] for x in samples)
    assert all(x["t_start"] <= x["t"] for x in samples)


def test_each_form_of_growth_is_named_with_its_size(runs: dict[str, Any]) -> None:
    s = runs["forms"]["summary"]
    gpu, verdict = s["gpu_memory"], s["gpu_memory_verdict"]
    assert [gpu[k]["verdict"] for k in "0123"] == ["growing", "growing", "flat", "flat"], verdict
    assert verdict["leak_suspected_on"] == [0, 1] and verdict["cant_tell_on"] == []
    per_request = gpu["0"]["slope_mib_per_request"]
    # Which clear slope comes first (the best fit) can tie with time when requests finish at a steady pace; the
    # per-request slope must be named, with its size.
    assert "request" in gpu["0"]["leak_by"] and abs(per_request - 200) <= 40, gpu["0"]
    assert f"+{per_request:.0f} ± " in verdict["verdict"].split("; GPU 1")[0]
    assert "request" in gpu["1"]["leak_by"] or "cycle" in gpu["1"]["leak_by"]
    assert abs(gpu["1"]["slope_mib_per_cycle"] - 120) <= 24, gpu["1"]
    assert gpu["2"]["range_mib"] > 50 and gpu["2"]["leak_by"] == []
    assert verdict["verdict"].endswith("GPU 2 flat, GPU 3 flat")


def test_report_names_the_leaking_cards_only(runs: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    assert (
        main(
            [
                "report",
                str(runs["issue-a"]["run"]),
                str(runs["forms"]["run"]),
                "--labels",
                "issue,forms",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    section = _section(out.read_text())
    verdicts = [line for line in section.splitlines() if "possible leak" in line]
    assert len(verdicts) == 2 and "GPU 1 flat" in verdicts[0] and "GPU 2 flat, GPU 3 flat" in verdicts[1]
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")[1:]]
        for line in section.splitlines()
        if line.startswith("| GPU")
    }
    assert rows["GPU 0 verdict"] == ["growing", "growing"] and rows["GPU 1 verdict"] == ["flat", "growing"]
    assert rows["GPU 2 verdict"] == ["–", "flat"]
    per_request = runs["forms"]["summary"]["gpu_memory"]["0"]["slope_mib_per_request"]
    assert rows["GPU 0 slope MiB/request"][1].startswith(f"{per_request:+.1f} ± ")
    png = out.with_name("report-gpu-memory.png")
    assert png.is_file() and png.stat().st_size > 1000


def _section(md: str) -> str:
    start = md.index("## GPU memory")
    end = md.find("\n## ", start + 1)
    return md[start:] if end < 0 else md[start:end]


def test_the_stand_in_grows_per_call_and_draws_the_same_noise(tmp_path: Path) -> None:
    exe = install(
        tmp_path,
        [FakeCard(0, base_mib=500, mib_per_call=10, name="Tesla T4"), FakeCard(1, base_mib=900, noise_mib=50)],
        seed=5,
    )
    outs = [subprocess.run([str(exe), *QUERY], capture_output=True, text=True, check=True).stdout for _ in range(3)]
    rows = [parse_query(o) for o in outs]
    assert [r[0] for r in rows] == [(0, 500.0 + 10 * i, 22528.0, "Tesla T4") for i in range(3)]
    noisy = [r[1][1] for r in rows]
    assert all(850 <= u <= 950 for u in noisy) and len(set(noisy)) > 1
    install(tmp_path, [FakeCard(0, base_mib=500, mib_per_call=10), FakeCard(1, base_mib=900, noise_mib=50)], seed=5)
    again = [
        parse_query(subprocess.run([str(exe), *QUERY], capture_output=True, text=True, check=True).stdout)[1][1]
        for _ in range(3)
    ]
    assert again == noisy


def _samples(used: list[float], dt: float = 0.2, cycles: int = 3, gpu: int = 0) -> list[dict[str, Any]]:
    n = len(used)
    return [
        {"t": 1000 + i * dt, "cycle": 1 + i * cycles // n, "gpu": gpu, "used_mib": u, "total_mib": 22528}
        for i, u in enumerate(used)
    ]


@pytest.mark.parametrize(
    "xs,ys,slope,noise_at_most",
    [
        (range(10), [10 * x for x in range(10)], 10.0, 0.3),  # a straight line: no scatter but the readings' rounding
        (range(10), [5] * 10, 0.0, 0.3),  # flat
        ([1, 2, 3], [10, 20, 30], 10.0, 1000),  # three whole-MiB points on a line: one degree of freedom, no precision
        ([1, 2], [5, 9], 4.0, None),  # no residual to judge by
        ([1, 1, 1], [5, 6, 7], None, None),  # no spread in x
    ],
)
def test_fit_slope(xs: Any, ys: list[float], slope: Any, noise_at_most: Any) -> None:
    s = fit_slope("cycle", list(xs), ys, autocorrelated=False)
    assert s.slope == (None if slope is None else pytest.approx(slope))
    if noise_at_most is None:
        assert s.noise is None
    else:
        assert s.noise is not None and noise_at_most / 10 <= s.noise <= noise_at_most


def test_autocorrelated_samples_widen_the_time_slope() -> None:
    """Memory that swings slowly with the load (not a leak) sampled every 0.2 s: the textbook interval calls a
    slope; with the samples' autocorrelation taken in, it is within noise."""
    ts = [i * 0.2 for i in range(300)]
    used = [8000 + 400 * math.sin(2 * math.pi * t / 30) + random.Random(i).uniform(-5, 5) for i, t in enumerate(ts)]
    naive = fit_slope("second", ts, used, autocorrelated=False)
    wide = fit_slope("second", ts, used, autocorrelated=True)
    assert naive.call in ("up", "down") and wide.call in ("within_noise", "unjudged")
    assert wide.independent is not None and wide.independent < 30
    card = summarize_gpu(_samples(used))["0"]  # type: ignore[index]  # summaries are dicts by card id
    assert card["verdict"] == "cant_tell" and card["leak_by"] == []
    v = leak_verdict({"0": card})
    assert v is not None and v["verdict"].startswith("can't tell: GPU 0: no slope clearly above zero (")
    assert v["cant_tell_on"] == [0] and "or a longer run would tell" in v["verdict"] and "% of its peak" in v["verdict"]


def test_a_noisy_flat_card_is_never_named() -> None:
    """±50 MiB of sampling noise on a flat card, 200 runs of 3 cycles (75 samples, a request finishing every
    second): no run names it, and nearly every one calls it flat."""
    verdicts = []
    for seed in range(200):
        rng = random.Random(seed)
        used = [float(int(8000 + rng.uniform(-50, 50))) for _ in range(75)]
        done = sorted(1000 + rng.uniform(0, 15) for _ in range(15))
        verdicts.append(summarize_gpu(_samples(used), done)["0"]["verdict"])  # type: ignore[index]  # as above
    assert "growing" not in verdicts and verdicts.count("flat") >= 198, verdicts


def test_a_small_leak_under_the_noise_is_still_named_with_its_size() -> None:
    """20 MiB per request under ±50 MiB noise, 30 requests over the run: the per-request slope finds it."""
    rng = random.Random(7)
    done = sorted(1000 + rng.uniform(0, 15) for _ in range(30))
    ts = [1000 + i * 0.2 for i in range(75)]
    used = [8000 + 20 * sum(d <= t for d in done) + rng.uniform(-50, 50) for t in ts]
    card = summarize_gpu(_samples(used), done)["0"]  # type: ignore[index]  # as above
    assert card["verdict"] == "growing" and "request" in card["leak_by"]
    assert abs(card["slope_mib_per_request"] - 20) <= 6


@pytest.mark.parametrize(
    "used,verdict",
    [
        ([3000.0] * 30, "flat"),
        ([3000.0 + 100 * (i // 10) for i in range(30)], "growing"),  # steps each cycle
        ([5000.0 - 100 * (i // 10) for i in range(30)], "falling"),
        ([3000.0, 3000.0], "too_few_cycles"),
    ],
)
def test_card_verdicts(used: list[float], verdict: str) -> None:
    assert summarize_gpu(_samples(used))["0"]["verdict"] == verdict  # type: ignore[index]  # as above


def test_verdict_texts() -> None:
    steps = [100.0 * (i // 10) for i in range(40)]  # four cycles of ten samples, a step each cycle
    cards = summarize_gpu(
        _samples([3000 + x for x in steps], cycles=4)
        + _samples([2000.0] * 40, cycles=4, gpu=1)
        + _samples([5000 - x for x in steps], cycles=4, gpu=2)
    )
    v = leak_verdict(cards)
    assert v is not None and v["verdict"].startswith("possible leak on GPU 0: +") and "MiB per cycle" in v["verdict"]
    assert v["verdict"].endswith("; GPU 1 flat, GPU 2 falling")
    flat = leak_verdict(summarize_gpu(_samples([2000.0] * 30) + _samples([2500.0] * 30, gpu=1)))
    assert flat is not None and flat["verdict"].startswith("no leak: every card's memory is flat")
    two = leak_verdict(
        summarize_gpu([{"t": float(c), "cycle": c, "gpu": 0, "used_mib": 1000 + 90 * c} for c in (1, 2)])
    )
    assert two is not None and two["leak_suspected_on"] == [] and two["verdict"].startswith("can't tell")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("0, 1000, 22528, NVIDIA GeForce RTX 2080 Ti", [(0, 1000.0, 22528.0, "NVIDIA GeForce RTX 2080 Ti")]),
        ("0, 1000, 22528", [(0, 1000.0, 22528.0, None)]),
        ("1, 20, [N/A], Tesla, rev 2", [(1, 20.0, None, "Tesla, rev 2")]),
        ("No devices were found", []),
        ("0, [N/A], 22528, X", []),
    ],
)
def test_parse_query(text: str, expected: list[tuple[Any, ...]]) -> None:
    assert parse_query(text) == expected


@pytest.mark.parametrize(
    "command",
    [
        ["bench", "--runs", "1", "--max-tokens", "32", "--warmup", "0"],
        ["capability", "--thinking", "off", "--datasets", "gsm8k", "--limit", "2"],
    ],
)
def test_bench_and_capability_record_peak_per_card(tmp_path: Path, command: list[str]) -> None:
    with start_sim(["--time-scale", "20"]) as sim:
        install(tmp_path / "bin", [FakeCard(0, 4000, mib_per_request=5), FLAT], sim.root_url + "/sim/events")
        env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalkit",
                *command,
                "--base-url",
                sim.base_url,
                "--out",
                str(tmp_path),
                "--name",
                "r",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert p.returncode == 0, p.stderr[-2000:]
        finished = sum(1 for e in sim.events() if e.get("done"))
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    gpu = s["gpu_memory"]
    assert set(gpu) == {"0", "1"} and gpu["1"]["peak_mib"] == 2500 and gpu["0"]["name"] == FLAT.name
    # The sampler's last sample comes after the last request, so card 0's peak counts every finished request.
    assert gpu["0"]["peak_mib"] == 4000 + 5 * finished
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["gpu_memory_sampler"].endswith("nvidia-smi")


def test_report_judges_an_old_run_from_its_gpu_samples(tmp_path: Path) -> None:
    """A run summarised before the present verdict (peak only) gets its verdict from gpu_memory.jsonl."""
    from runfixtures import write_run

    run = write_run(
        tmp_path / "old",
        "stress",
        {
            "seed": 1,
            "cycles": 4,
            "requests": 0,
            "errors": 0,
            "wrong_answers": 0,
            "metrics": {},
            "gpu_memory": {"0": {"peak_mib": 1300.0}, "1": {"peak_mib": 900.0}},
            "gpu_memory_verdict": {"verdict": "no leak: (the old verdict)"},
        },
    )
    samples = [
        {
            "t": 100.0 + 10 * c + k,
            "cycle": c,
            "gpu": g,
            "used_mib": (900.0 if g else 1000 + 75 * c + k),
            "total_mib": 16384,
        }
        for c in range(1, 5)
        for k in range(3)
        for g in (0, 1)
    ]
    (run / "gpu_memory.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    out = tmp_path / "report.md"
    assert main(["report", str(run), "-o", str(out)]) == 0
    section = _section(out.read_text())
    assert "possible leak on GPU 0: " in section and "+75.0 ± " in section and "GPU 1 flat" in section
    assert "the old verdict" not in section
