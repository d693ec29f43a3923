"""Wall time of the full 140-question capability run against `evalkit sim` at zero latency (huge time scale):
what grading and code execution cost alone. Target: under 60 s on a 2-core machine.

    python benchmarks/bench_capability_grading.py [--runs 1] [--concurrency 4]
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

from evalkit.sim.launch import start_sim

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    """Run the full set `--runs` times per thinking mode and print the wall times."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=4)
    a = p.parse_args()
    os.environ.setdefault("EVALKIT_DATA_DIR", str(REPO.parent / "shared" / "datasets"))
    sim = start_sim(["--port", "0", "--time-scale", "100000", "--accuracy", "1.0"])
    try:
        with tempfile.TemporaryDirectory() as out:
            for thinking in ("off", "low"):
                for n in range(a.runs):
                    t0 = time.perf_counter()
                    proc = subprocess.run(
                        [
                            sys.executable,
                            "-m",
                            "evalkit",
                            "capability",
                            "--base-url",
                            sim.base_url,
                            "--thinking",
                            thinking,
                            "--concurrency",
                            str(a.concurrency),
                            "--out",
                            out,
                            "--name",
                            f"{thinking}-{n}",
                        ],
                        capture_output=True,
                        text=True,
                    )
                    wall = time.perf_counter() - t0
                    summary = json.loads((Path(out) / f"{thinking}-{n}" / "summary.json").read_text())
                    print(
                        f"thinking={thinking} run={n + 1} wall_s={wall:.1f} "
                        f"correct={summary['total']['correct']}/{summary['total']['total']} exit={proc.returncode}"
                    )
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
