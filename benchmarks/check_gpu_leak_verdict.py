"""How often the GPU memory verdict names the right cards: repeated `evalkit stress` runs against `evalkit sim`
with the `nvidia-smi` stand-in of issue 34, one line per run and a tally at the end.

    python benchmarks/check_gpu_leak_verdict.py [--runs 10] [--setup issue|forms|synthetic]

`issue`: card 0 growing 400 MiB a second from 8,000 MiB, card 1 flat (`--cycles 3 --time-scale 50
--gpu-interval 0.2` against `dual-2080ti-after`): card 0 must be named every run, card 1 never.
`forms` (4 cycles): card 0 growing 200 MiB per finished request, card 1 120 MiB per cycle, card 2 flat with ±50
MiB of sampling noise, card 3 flat: 0 and 1 named (0 with a per-request slope within 20% of 200), 2 and 3 never.
`synthetic`: no server; `--runs` flat cards with ±50 MiB of uniform noise (20, 75 or 300 samples over 3 cycles,
15 requests finishing at random) judged by the verdict alone: how many are named, how many are not called flat.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from evalkit.sim.launch import start_sim
from fake_nvidia_smi import FakeCard, install

SETUPS = {  # the cards, the ones to be named, the cycles
    "issue": ([FakeCard(0, base_mib=8000, mib_per_second=400), FakeCard(1, base_mib=8000)], {0}, 3),
    "forms": (
        [
            FakeCard(0, base_mib=3000, mib_per_request=200),
            FakeCard(1, base_mib=3000, mib_per_cycle=120),
            FakeCard(2, base_mib=8000, noise_mib=50),
            FakeCard(3, base_mib=2500),
        ],
        {0, 1},
        4,
    ),
}


def one_run(out: Path, name: str, cards: list[FakeCard], cycles: int, seed: int, extra: list[str]) -> dict[str, Any]:
    """One stress run with the stand-in on the PATH; returns its summary."""
    bindir = out / f"bin-{name}"
    with start_sim(["--profile", "dual-2080ti-after", "--time-scale", "50"]) as sim:
        install(bindir, cards, sim.root_url + "/sim/events", out / name / "requests.jsonl", seed=seed)
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
                str(out),
                "--name",
                name,
                "--no-progress",
                "--cycles",
                str(cycles),
                "--time-scale",
                "50",
                "--gpu-interval",
                "0.2",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
    if p.returncode != 0:
        raise SystemExit(p.stderr[-2000:])
    return json.loads((out / name / "summary.json").read_text())


def synthetic(runs: int) -> None:
    """The verdict's false alarms on flat noisy cards, without a server."""
    import random

    from evalkit.evidence.gpu_memory import summarize_gpu

    named = not_flat = 0
    for seed in range(runs):
        rng = random.Random(seed)
        n = rng.choice([20, 75, 300])
        samples = [
            {
                "t": 1000 + 0.2 * i,
                "cycle": 1 + 3 * i // n,
                "gpu": 0,
                "used_mib": float(int(8000 + rng.uniform(-50, 50))),
            }
            for i in range(n)
        ]
        done = sorted(1000 + rng.uniform(0, 0.2 * n) for _ in range(15))
        verdict = summarize_gpu(samples, done)["0"]["verdict"]  # type: ignore[index]  # summaries are dicts by card id
        named += verdict == "growing"
        not_flat += verdict != "flat"
    print(f"{runs} flat cards with ±50 MiB noise: {named} named as leaking, {not_flat} not called flat")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--setup", choices=[*sorted(SETUPS), "synthetic"], default="issue")
    ap.add_argument("--stress-args", default="", help="more `evalkit stress` arguments, space-separated")
    args = ap.parse_args()
    if args.setup == "synthetic":
        synthetic(args.runs)
        return
    cards, leaking, cycles = SETUPS[args.setup]
    right = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            t0 = time.monotonic()
            s = one_run(Path(tmp), f"run{i}", cards, cycles, seed=i, extra=args.stress_args.split())
            named = set(s["gpu_memory_verdict"]["leak_suspected_on"])
            right += named == leaking
            figures = "; ".join(
                f"GPU {k} {c['verdict']}"
                + "".join(
                    f" {c.get(f'slope_mib_per_{u}'):+.1f}±{c.get(f'slope_noise_mib_per_{u}') or 0:.1f}/{u}"
                    for u in ("second", "request", "cycle")
                    if c.get(f"slope_mib_per_{u}") is not None
                )
                for k, c in s["gpu_memory"].items()
            )
            print(
                f"run {i}: {time.monotonic() - t0:.0f} s, named {sorted(named)} "
                f"({'right' if named == leaking else 'WRONG'}): {figures}"
            )
            print(f"   {s['gpu_memory_verdict']['verdict']}")
    print(f"{right} of {args.runs} runs named exactly GPU {sorted(leaking)}")


if __name__ == "__main__":
    main()
