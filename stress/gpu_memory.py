"""Watching the server's GPU memory with `nvidia-smi` when it is on the PATH (a self-hosted GPU runner).

A leak shows as a positive slope of each cycle's peak; the write-up's peak VRAM climbed cycle after cycle.
"""

from __future__ import annotations

import asyncio
import shutil
from typing import Any, Callable

from evalkit.clock import Clock
from evalkit_stress.background import stop_task

QUERY = ["--query-gpu=index,memory.used,memory.total", "--format=csv,noheader,nounits"]


def nvidia_smi() -> str | None:
    """The `nvidia-smi` on the PATH, or None."""
    return shutil.which("nvidia-smi")


def parse_query(text: str) -> list[tuple[int, float, float | None]]:
    """(gpu index, used MiB, total MiB) rows from `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2:
            continue
        try:
            total = float(parts[2]) if len(parts) > 2 and parts[2] not in ("", "[N/A]") else None
            rows.append((int(parts[0]), float(parts[1]), total))
        except ValueError:
            continue
    return rows


class GpuMemorySampler:
    """Runs `nvidia-smi` every `interval_s` and hands each sample to `sink` with the current cycle."""

    def __init__(self, exe: str, clock: Clock, sink: Callable[[dict[str, Any]], None], interval_s: float = 1.0) -> None:
        self.exe = exe
        self.clock = clock
        self.sink = sink
        self.interval_s = interval_s
        self.cycle = 0
        self._task: asyncio.Task[None] | None = None

    async def sample_once(self) -> None:
        """One query; a failing `nvidia-smi` loses a sample, never the run."""
        try:
            proc = await asyncio.create_subprocess_exec(
                self.exe, *QUERY, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
            )
            out, _ = await asyncio.wait_for(proc.communicate(), timeout=10)
        except (OSError, asyncio.TimeoutError):
            return
        t = self.clock.now()
        for gpu, used, total in parse_query(out.decode(errors="replace")):
            self.sink({"t": t, "cycle": self.cycle, "gpu": gpu, "used_mib": used, "total_mib": total})

    async def _loop(self) -> None:
        while True:
            await self.sample_once()
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        """Begin sampling in the running loop."""
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        """Stop sampling (after one last sample)."""
        if self._task is not None:
            await stop_task(self._task)
            await self.sample_once()


def _slope(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else None


def summarize_gpu(samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per GPU: peak MiB, each cycle's peak, and the least-squares slope of those peaks (MiB per cycle)."""
    if not samples:
        return None
    out: dict[str, Any] = {}
    for gpu in sorted({s["gpu"] for s in samples}):
        mine = [s for s in samples if s["gpu"] == gpu]
        per_cycle: dict[int, float] = {}
        for s in mine:
            if s["cycle"] >= 1:
                per_cycle[s["cycle"]] = max(per_cycle.get(s["cycle"], 0.0), s["used_mib"])
        cycles = sorted(per_cycle)
        out[str(gpu)] = {
            "peak_mib": max(s["used_mib"] for s in mine),
            "total_mib": mine[-1].get("total_mib"),
            "cycle_peak_mib": [per_cycle[c] for c in cycles],
            "slope_mib_per_cycle": _slope([float(c) for c in cycles], [per_cycle[c] for c in cycles]),
            "samples": len(mine),
        }
    return out
