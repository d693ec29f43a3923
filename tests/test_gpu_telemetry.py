"""GPU power, energy per output token, SM utilization and memory: from NVML (a stand-in `pynvml` here) through a
real bench against the sim, and the summary arithmetic against hand-made samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.evidence.gpu_telemetry import energy_between, parse_smi, summarize_telemetry
from runfixtures import bench_args

FAKE = Path(__file__).parent / "fake_nvml"


def test_energy_per_token_from_a_bench_over_nvml(sim, tmp_path: Path) -> None:
    s = sim("--time-scale", "20")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(FAKE), os.environ.get("PYTHONPATH", "")]),
        "FAKE_NVML_WATTS": "300",
        "EVALKIT_GPU_TELEMETRY": "nvml",
    }
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalkit",
            *bench_args(s.base_url, tmp_path, "b"),
            "--runs",
            "1",
            "--max-tokens",
            "64",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    g = summary["gpu_telemetry"]
    assert g["source"] == "nvml" and g["energy_from"].startswith("the cards' energy counters")
    card = g["cards"][0]
    assert card["power_w"]["mean"] == 300 and card["sm_util_pct"]["mean"] == 87 and card["mem_used_mib_max"] == 20480
    run = g["run"]
    # 300 W over the requests' time, per generated token (the counter grows with the wall clock)
    assert run["j_per_output_token"] == pytest.approx(300 * run["seconds"] / run["output_tokens"], rel=0.02)
    assert set(g["per_label"]) >= {"code", "math", "prose"}
    assert "J/output token" in p.stdout  # printed next to the tok/s table (standard output: #58)
    r = subprocess.run(
        [sys.executable, "-m", "evalkit", "report", str(tmp_path / "b"), "-o", str(tmp_path / "r.md")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "r.md").read_text()
    assert "GPU power and energy" in md and "energy per output token (J)" in md


def test_summary_integrates_power_without_a_counter_and_reads_the_counter_with_one() -> None:
    smi = [
        {
            "t": float(t),
            "gpu": 0,
            "power_w": 100.0 if t < 5 else 300.0,
            "energy_j": None,
            "sm_util_pct": 50.0,
            "mem_used_mib": 1000.0,
            "source": "nvidia-smi",
        }
        for t in range(11)
    ]
    # trapezoids: 4 s at 100 W, the 4->5 step at 100, 5->6 at 200 (mean of 100 and 300), 5 s at 300
    assert energy_between(smi, [(0.0, 10.0)]) == pytest.approx(400 + 100 + 200 + 1500 - 100, abs=1e-6)
    nvml = [
        {"t": float(t), "gpu": 0, "power_w": 250.0, "energy_j": 1e6 + 250.0 * t, "source": "nvml"} for t in range(11)
    ]
    reqs = [
        {"status": "ok", "t_sent": 2.0, "t_done": 4.0, "completion_tokens": 100},
        {"status": "ok", "t_sent": 3.0, "t_done": 6.5, "completion_tokens": 100},  # overlaps: counted once
        {"status": "error", "t_sent": 8.0, "t_done": 9.0, "completion_tokens": 0},
    ]
    run = summarize_telemetry(nvml, reqs)["run"]
    assert run["energy_j"] == pytest.approx(250 * 4.5) and run["j_per_output_token"] == pytest.approx(250 * 4.5 / 200)
    assert summarize_telemetry([], reqs) is None
    assert energy_between(nvml, [(20.0, 21.0)]) is None  # never guessed outside the sampled span


def test_nvidia_smi_rows_parse() -> None:
    rows = parse_smi("0, 512.34, 93, 22783, 143771, NVIDIA H200\n1, [N/A], [N/A], 10, 100, Card, with comma\n")
    assert rows[0]["power_w"] == 512.34 and rows[0]["sm_util_pct"] == 93 and rows[0]["name"] == "NVIDIA H200"
    assert rows[1]["power_w"] is None and rows[1]["name"] == "Card, with comma"
