"""Per-card GPU memory over real HTTP: `evalkit stress` against `evalkit sim` with the `nvidia-smi` stand-in.

The stand-in's card 0 leaks 50 MiB per 14 finished requests (one stress cycle) and card 1 stays flat, as the
write-up's two-card bug filled GPU 0 only: the summary, the printed verdict and the report must name card 0 and
only card 0. Flat cards: no leak named. The stand-in also models a single card. Short prompts at `--time-scale 10`,
so a cycle takes about two seconds; the slope is judged per cycle, so timing does not enter the verdict.
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
from evalkit.rundir import read_jsonl
from evalkit.sim.launch import start_sim
from evalkit_stress.gpu_memory import QUERY, card_verdict, fit_line, leak_verdict, parse_query, summarize_gpu
from fake_nvidia_smi import FakeCard, install

REQUESTS_PER_CYCLE = 14
LEAK = FakeCard(0, base_mib=3000, mib_per_request=50 / REQUESTS_PER_CYCLE, name="NVIDIA GeForce RTX 2080 Ti")
FLAT = FakeCard(1, base_mib=2500, name="NVIDIA GeForce RTX 2080 Ti")
CYCLES = 5
# Cycles of ~2 s: the stand-in answers in ~0.2 s on a busy machine, and a cycle needs several samples.
SCALE = "10"


def stress(tmp: Path, name: str, cards: list[FakeCard], cycles: int) -> tuple[Path, str]:
    """One short stress run with the stand-in on the PATH; returns (run dir, stdout)."""
    bindir = tmp / f"bin-{name}"
    with start_sim(["--profile", "dual-2080ti-after", "--time-scale", SCALE]) as sim:
        install(bindir, cards, sim.root_url + "/sim/events")
        env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
        p = subprocess.run([sys.executable, "-m", "evalkit", "stress", "--base-url", sim.base_url, "--out", str(tmp),
                            "--name", name, "--no-progress", "--cycles", str(cycles), "--seed", "7",
                            "--long-tokens", "3000", "--time-scale", SCALE, "--gen-tokens", "64",
                            "--gpu-interval", "0.1"], capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    return Path(p.stdout.strip().splitlines()[-1]), p.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("gpu")
    out = {}
    # A flat card needs no more than the fewest cycles that give a slope its noise.
    for name, cards, cycles in (("leak", [LEAK, FLAT], CYCLES), ("flat", [FakeCard(0, 3000), FLAT], 3)):
        run, stdout = stress(tmp, name, cards, cycles)
        out[name] = {"run": run, "stdout": stdout, "summary": json.loads((run / "summary.json").read_text())}
    return out


def test_leak_on_card_0_only_is_named_with_its_figures(runs: dict[str, Any]) -> None:
    s = runs["leak"]["summary"]
    gpu, verdict = s["gpu_memory"], s["gpu_memory_verdict"]
    assert set(gpu) == {"0", "1"}
    assert (gpu["0"]["index"], gpu["0"]["name"]) == (0, "NVIDIA GeForce RTX 2080 Ti")
    assert gpu["0"]["cycles"] == list(range(1, CYCLES + 1))
    assert 40 <= gpu["0"]["slope_mib_per_cycle"] <= 60, gpu["0"]
    assert gpu["0"]["slope_noise_mib_per_cycle"] < gpu["0"]["slope_mib_per_cycle"]
    assert gpu["0"]["slope_mib_per_hour"] > 0
    assert (gpu["0"]["verdict"], gpu["1"]["verdict"]) == ("growing", "flat")
    assert gpu["1"]["slope_mib_per_cycle"] == 0 and gpu["1"]["peak_mib"] == 2500
    assert (verdict["leak_suspected_on"], verdict["cards_growing"], verdict["cards"]) == ([0], 1, 2)
    assert verdict["verdict"].startswith("possible leak on GPU 0 (NVIDIA GeForce RTX 2080 Ti): +")
    assert "GPU 1 flat" in verdict["verdict"] and "GPU 1 (" not in verdict["verdict"]
    assert f"{gpu['0']['slope_mib_per_cycle']:+.1f}" in verdict["verdict"]
    assert "GPU memory: possible leak on GPU 0 (" in runs["leak"]["stdout"]
    # The peak in the summary is the largest sample on disk.
    samples = [x for x in read_jsonl(runs["leak"]["run"] / "gpu_memory.jsonl") if x["gpu"] == 0]
    assert gpu["0"]["peak_mib"] == max(x["used_mib"] for x in samples) >= 3000 + 50 * (CYCLES - 1)


def test_flat_cards_name_no_leak(runs: dict[str, Any]) -> None:
    s = runs["flat"]["summary"]
    assert [c["verdict"] for c in s["gpu_memory"].values()] == ["flat", "flat"]
    assert s["gpu_memory_verdict"]["leak_suspected_on"] == []
    assert "no leak" in s["gpu_memory_verdict"]["verdict"]
    assert "possible leak" not in runs["flat"]["stdout"]


def test_the_stand_in_models_a_single_card(tmp_path: Path) -> None:
    exe = install(tmp_path, [FakeCard(0, base_mib=500, mib_per_call=10, name="Tesla T4")])
    outs = [subprocess.run([str(exe), *QUERY], capture_output=True, text=True, check=True).stdout for _ in range(3)]
    rows = [parse_query(o) for o in outs]
    assert rows == [[(0, 500.0 + 10 * i, 22528.0, "Tesla T4")] for i in range(3)]
    samples = [{"t": float(i), "cycle": i + 1, "gpu": g, "name": n, "used_mib": u, "total_mib": tot}
               for i, r in enumerate(rows) for g, u, tot, n in r]
    v = leak_verdict(summarize_gpu(samples))
    assert v is not None and v["leak_suspected_on"] == [0] and v["verdict"].startswith("possible leak on GPU 0 ")


def _section(md: str) -> str:
    start = md.index("## GPU memory")
    end = md.find("\n## ", start + 1)
    return md[start:] if end < 0 else md[start:end]


def test_report_names_card_0_and_only_card_0(runs: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    assert main(["report", str(runs["flat"]["run"]), str(runs["leak"]["run"]), "--labels", "flat,leak",
                 "-o", str(out)]) == 0
    section = _section(out.read_text())
    verdicts = [line for line in section.splitlines() if "possible leak" in line]
    assert len(verdicts) == 1 and "leak" in verdicts[0] and "GPU 0" in verdicts[0] and "GPU 1 flat" in verdicts[0]
    assert "flat: no leak" in section
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")[1:]]
            for line in section.splitlines() if line.startswith("| GPU")}
    assert rows["GPU 0 verdict"] == ["flat", "growing"] and rows["GPU 1 verdict"] == ["flat", "flat"]
    leak_slope = runs["leak"]["summary"]["gpu_memory"]["0"]["slope_mib_per_cycle"]
    assert rows["GPU 0 slope MiB/cycle"][1].startswith(f"{leak_slope:+.1f}") and rows["GPU 0 slope MiB/cycle"][1].endswith("▼")
    assert rows["GPU 1 slope MiB/cycle"][1].endswith("≈")
    png = out.with_name("report-gpu-memory.png")
    assert png.is_file() and png.stat().st_size > 1000
    assert "report-gpu-memory.png" in out.read_text()


@pytest.mark.parametrize("text,expected", [
    ("0, 1000, 22528, NVIDIA GeForce RTX 2080 Ti", [(0, 1000.0, 22528.0, "NVIDIA GeForce RTX 2080 Ti")]),
    ("0, 1000, 22528", [(0, 1000.0, 22528.0, None)]),
    ("1, 20, [N/A], Tesla, rev 2", [(1, 20.0, None, "Tesla, rev 2")]),
    ("No devices were found", []),
    ("0, [N/A], 22528, X", []),
])
def test_parse_query(text: str, expected: list[tuple[Any, ...]]) -> None:
    assert parse_query(text) == expected


@pytest.mark.parametrize("slope,noise,growth,verdict", [
    (50.0, 1.0, 150.0, "growing"),
    (-20.0, 5.0, -60.0, "falling"),
    (3.0, 10.0, 9.0, "flat"),       # within its noise
    (2.0, 0.0, 6.0, "flat"),        # a straight line, but under the growth floor
    (50.0, None, 50.0, "too_few_cycles"),
    (None, None, None, "too_few_cycles"),
])
def test_card_verdict(slope: Any, noise: Any, growth: Any, verdict: str) -> None:
    assert card_verdict(slope, noise, growth) == verdict


def test_noisy_flat_card_and_two_cycles() -> None:
    slope, noise = fit_line([1, 2, 3, 4, 5], [2000, 2006, 1998, 2004, 2000])
    assert slope is not None and noise is not None and abs(slope) < noise
    two = summarize_gpu([{"t": float(c), "cycle": c, "gpu": 0, "used_mib": 1000 + 90 * c} for c in (1, 2)])
    assert two is not None and two["0"]["verdict"] == "too_few_cycles"
    v = leak_verdict(two)
    assert v is not None and v["leak_suspected_on"] == [] and v["verdict"].startswith("can't tell")


@pytest.mark.parametrize("command", [
    ["bench", "--runs", "1", "--max-tokens", "32", "--warmup", "0"],
    ["capability", "--thinking", "off", "--datasets", "gsm8k", "--limit", "2"],
])
def test_bench_and_capability_record_peak_per_card(tmp_path: Path, command: list[str]) -> None:
    with start_sim(["--time-scale", "20"]) as sim:
        install(tmp_path / "bin", [FakeCard(0, 4000, mib_per_request=5), FLAT], sim.root_url + "/sim/events")
        env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        p = subprocess.run([sys.executable, "-m", "evalkit", *command, "--base-url", sim.base_url,
                            "--out", str(tmp_path), "--name", "r"], capture_output=True, text=True, timeout=120,
                           env=env)
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
    """A run summarised before the verdict existed (peak and slope only) gets its verdict from gpu_memory.jsonl."""
    from runfixtures import write_run

    run = write_run(tmp_path / "old", "stress", {"seed": 1, "cycles": 4, "requests": 0, "errors": 0,
                                                  "wrong_answers": 0, "metrics": {},
                                                  "gpu_memory": {"0": {"peak_mib": 1300.0}, "1": {"peak_mib": 900.0}}})
    samples = [{"t": 100.0 + 10 * c + k, "cycle": c, "gpu": g, "used_mib": (900.0 if g else 1000 + 75 * c + k),
                "total_mib": 16384} for c in range(1, 5) for k in range(3) for g in (0, 1)]
    (run / "gpu_memory.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    out = tmp_path / "report.md"
    assert main(["report", str(run), "-o", str(out)]) == 0
    section = _section(out.read_text())
    assert "possible leak on GPU 0: +75.0 ± 0.0 MiB per cycle" in section and "GPU 1 flat" in section
