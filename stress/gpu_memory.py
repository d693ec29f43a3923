"""Watching the server's GPU memory with `nvidia-smi` when it is on the PATH (a self-hosted GPU runner).

A leak shows as a positive slope of each cycle's peak; the write-up's peak VRAM climbed cycle after cycle, and its
two-card bug (a pointer table allocated every step and never freed) filled GPU 0 only. So every card is judged on
its own: its peak, the least-squares slope of its cycle peaks, that slope's noise, and a verdict.
"""

from __future__ import annotations

import asyncio
import math
import shutil
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Sequence

from evalkit.clock import Clock
from evalkit.rundir import RunDir
from evalkit_stress.background import stop_task

GPU_FILE = "gpu_memory.jsonl"
# `name` last: a card's name is the only field that could hold a comma, so it takes whatever follows.
QUERY = ["--query-gpu=index,memory.used,memory.total,name", "--format=csv,noheader,nounits"]
# nvidia-smi reads whole MiB and allocators grow in 2 MiB pages: a run whose cycle peaks rise by less than this
# in all has not shown a leak, however straight the line.
MIN_GROWTH_MIB = 8.0
# A slope's noise is its 95% confidence half-width; it needs at least this many cycle peaks (one residual).
MIN_CYCLES = 3
EVIDENCE = "nvidia-smi memory.used per card; slope of each cycle's peak (least squares), noise its 95% half-width"


def nvidia_smi() -> str | None:
    """The `nvidia-smi` on the PATH, or None."""
    return shutil.which("nvidia-smi")


def parse_query(text: str) -> list[tuple[int, float, float | None, str | None]]:
    """(gpu index, used MiB, total MiB, name) rows from `nvidia-smi --query-gpu=index,memory.used,memory.total,name`.

    Older three-column output (no name) parses too, with name None.
    """
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2:
            continue
        try:
            total = float(parts[2]) if len(parts) > 2 and parts[2] not in ("", "[N/A]") else None
            name = ", ".join(parts[3:]) or None
            rows.append((int(parts[0]), float(parts[1]), total, name))
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
        for gpu, used, total, name in parse_query(out.decode(errors="replace")):
            self.sink({"t": t, "cycle": self.cycle, "gpu": gpu, "name": name, "used_mib": used, "total_mib": total})

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


@asynccontextmanager
async def sample_gpu_memory(rundir: RunDir, clock: Clock, interval_s: float = 1.0) -> AsyncIterator[str | None]:
    """Sample into the run's `gpu_memory.jsonl` for the duration of the block when `nvidia-smi` exists.

    Yields the `nvidia-smi` path (also written to the manifest as `gpu_memory_sampler`), or None.
    """
    exe = nvidia_smi()
    rundir.update_manifest(gpu_memory_sampler=exe)
    if exe is None:
        yield None
        return
    # Appends fsync; a writer thread keeps them off the event loop that is timing the server's stream.
    io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpu-memory-writer")
    sampler = GpuMemorySampler(exe, clock, lambda s: io.submit(rundir.append, GPU_FILE, s), interval_s)
    sampler.start()
    try:
        yield exe
    finally:
        await sampler.stop()
        io.shutdown(wait=True)


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float | None, float | None]:
    """Least-squares slope of ys on xs and its 95% confidence half-width (None without a residual to judge by)."""
    n = len(xs)
    if n < 2:
        return None, None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx:
        return None, None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    if n < MIN_CYCLES:
        return slope, None
    from scipy.stats import t as student_t

    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys))
    se = math.sqrt(resid / (n - 2) / sxx)
    return slope, float(student_t.ppf(0.975, n - 2)) * se


def card_verdict(slope: float | None, noise: float | None, growth: float | None) -> str:
    """`growing` / `falling` when the slope passes its noise and the growth floor, `flat`, or `too_few_cycles`."""
    if slope is None or noise is None or growth is None:
        return "too_few_cycles"
    if abs(slope) > noise and abs(growth) >= MIN_GROWTH_MIB:
        return "growing" if slope > 0 else "falling"
    return "flat"


def _card(mine: list[dict[str, Any]]) -> dict[str, Any]:
    peaks: dict[int, float] = {}
    times: dict[int, list[float]] = {}
    for s in mine:
        c = int(s.get("cycle") or 0)
        if c >= 1:  # cycle 0 is token counting before the schedule: part of the peak, not of the slope
            peaks[c] = max(peaks.get(c, 0.0), s["used_mib"])
            times.setdefault(c, []).append(float(s["t"]))
    cycles = sorted(peaks)
    ys = [peaks[c] for c in cycles]
    slope, noise = fit_line([float(c) for c in cycles], ys)
    # Per hour: the same peaks against each cycle's mean sample time, so hours are the run's own (sped-up) hours.
    per_s, noise_s = fit_line([sum(times[c]) / len(times[c]) for c in cycles], ys)
    growth = None if slope is None else slope * (cycles[-1] - cycles[0])
    names = [s.get("name") for s in mine if s.get("name")]
    return {
        "index": int(mine[0]["gpu"]),
        "name": names[-1] if names else None,
        "peak_mib": max(s["used_mib"] for s in mine),
        "total_mib": mine[-1].get("total_mib"),
        "first_mib": mine[0]["used_mib"],
        "last_mib": mine[-1]["used_mib"],
        "cycles": cycles,
        "cycle_peak_mib": ys,
        "slope_mib_per_cycle": slope,
        "slope_noise_mib_per_cycle": noise,
        "slope_mib_per_hour": None if per_s is None else per_s * 3600,
        "slope_noise_mib_per_hour": None if noise_s is None else noise_s * 3600,
        "growth_mib": growth,
        "verdict": card_verdict(slope, noise, growth),
        "samples": len(mine),
    }


def summarize_gpu(samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per GPU (keyed by index as text): peak, cycle peaks, slope per cycle and per hour, its noise, a verdict."""
    if not samples:
        return None
    out: dict[str, Any] = {}
    for gpu in sorted({int(s["gpu"]) for s in samples}):
        out[str(gpu)] = _card(sorted((s for s in samples if int(s["gpu"]) == gpu), key=lambda s: s["t"]))
    return out


def _describe(c: dict[str, Any]) -> str:
    name = f" ({c['name']})" if c.get("name") else ""
    per_hour = (f", {c['slope_mib_per_hour']:+.0f} ± {c['slope_noise_mib_per_hour']:.0f} MiB per hour"
                if c.get("slope_mib_per_hour") is not None and c.get("slope_noise_mib_per_hour") is not None else "")
    return (f"GPU {c['index']}{name}: {c['slope_mib_per_cycle']:+.1f} ± {c['slope_noise_mib_per_cycle']:.1f} MiB per "
            f"cycle{per_hour}, peak {c['peak_mib']:.0f} MiB over {len(c['cycles'])} cycles")


def leak_verdict(cards: dict[str, Any] | None) -> dict[str, Any] | None:
    """Which cards' memory grows beyond noise (a possible leak, named with its figures); None without samples."""
    if not cards:
        return None
    ordered = [cards[k] for k in sorted(cards, key=int)]
    growing = [c for c in ordered if c.get("verdict") == "growing"]
    unknown = [c for c in ordered if c.get("verdict") == "too_few_cycles"]
    if growing:
        where = "on every card: " if len(growing) == len(ordered) > 1 else "on "
        text = "possible leak " + where + "; ".join(_describe(c) for c in growing)
        others = [c for c in ordered if c not in growing]
        if others:
            text += "; " + ", ".join(f"GPU {c['index']} {c['verdict'].replace('_', ' ')}" for c in others)
    elif unknown:
        text = f"can't tell: fewer than {MIN_CYCLES} cycles to judge a slope by"
    else:
        text = "no leak: every card's memory is flat across cycles (slope within noise)"
    # `cards_growing` is a number so that a gate rule can hold it at 0.
    return {"leak_suspected_on": [c["index"] for c in growing], "cards_growing": len(growing), "cards": len(ordered),
            "verdict": text, "evidence": EVIDENCE}


def peaks_line(cards: dict[str, Any] | None) -> str | None:
    """One line for a command's printed summary: each card's peak (and its slope when cycles were sampled)."""
    if not cards:
        return None
    parts = []
    for k in sorted(cards, key=int):
        c = cards[k]
        slope = c.get("slope_mib_per_cycle")
        parts.append(f"GPU {c['index']} peak {c['peak_mib']:.0f} MiB"
                     + (f" ({slope:+.1f} MiB/cycle, {c['verdict'].replace('_', ' ')})" if slope is not None else ""))
    return "GPU memory: " + ", ".join(parts)
