"""Watching the server's GPU memory with `nvidia-smi` when it is on the PATH (a self-hosted GPU runner).

The write-up's two-card bug (a pointer table allocated every step and never freed) filled GPU 0 only, about 200 MiB
a request. So every card is judged on its own, on every slope it has (`gpu_slopes`: per second of run time, per
finished request, per cycle, each with its own noise): `growing` when any is clearly above zero, `flat` only when
all are within noise and the card's memory moved little against its peak, else `cant_tell` with what would tell.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypedDict, cast

from evalkit.clock import Clock
from evalkit.eventloop import stop_task
from evalkit.evidence.gpu_slopes import MIN_GROWTH_MIB, UNITS, Slope, fit_slope, samples_r2
from evalkit.evidence.request_lines import RequestLineJson
from evalkit.runs.rundir import RunDir

GPU_FILE = "gpu_memory.jsonl"
# `name` last: a card's name is the only field that could hold a comma, so it takes whatever follows.
QUERY = ["--query-gpu=index,memory.used,memory.total,name", "--format=csv,noheader,nounits"]
# `flat` needs the card's memory to have moved (max - min over the cycles) by no more than this share of its peak.
FLAT_RANGE_SHARE = 0.05
EVIDENCE = (
    "nvidia-smi memory.used per card; least-squares slopes against run time, finished requests (the "
    "client's t_done) and each cycle's peak, noise their 99.98% half-width, the first two widened for "
    "autocorrelated samples"
)
__all__ = [
    "FLAT_RANGE_SHARE",
    "GPU_FILE",
    "MIN_GROWTH_MIB",
    "GpuMemorySampler",
    "card_slopes",
    "card_verdict",
    "done_times",
    "leak_verdict",
    "nvidia_smi",
    "parse_query",
    "peaks_line",
    "sample_gpu_memory",
    "summarize_gpu",
]


class GpuMemoryLine(TypedDict):
    """One line of `gpu_memory.jsonl`: one card's memory read between `t_start` and `t`, in a cycle."""

    t: float
    t_start: float
    cycle: int
    gpu: int
    name: str | None
    used_mib: float
    total_mib: float | None


class SlopeDetail(TypedDict):
    """One slope of a card as summary.json details it (`slopes.second` ...)."""

    points: int
    independent_points: float | None
    span: float
    r2: float | None
    samples_r2: float | None
    growth_mib: float | None
    call: str


class GpuCardJson(TypedDict):
    """One card of a summary's `gpu_memory` (`summarize_gpu`), in the order written."""

    index: int
    name: str | None
    peak_mib: float
    total_mib: float | None
    first_mib: float
    last_mib: float
    range_mib: float | None
    cycles: list[int]
    cycle_peak_mib: list[float]
    slope_mib_per_second: float | None
    slope_noise_mib_per_second: float | None
    slope_mib_per_request: float | None
    slope_noise_mib_per_request: float | None
    slope_mib_per_cycle: float | None
    slope_noise_mib_per_cycle: float | None
    slope_mib_per_hour: float | None
    slope_noise_mib_per_hour: float | None
    growth_mib: float | None
    slopes: dict[str, SlopeDetail]
    leak_by: list[str]
    verdict: str
    samples: int


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

    def __init__(
        self, exe: str, clock: Clock, sink: Callable[[GpuMemoryLine], object], interval_s: float = 1.0
    ) -> None:
        self.exe = exe
        self.clock = clock
        self.sink = sink
        self.interval_s = interval_s
        self.cycle = 0
        self._task: asyncio.Task[None] | None = None

    async def sample_once(self) -> None:
        """One query; a failing `nvidia-smi` loses a sample, never the run.

        `t_start` is when the query began and `t` when it returned: the card was read somewhere in between.
        """
        t_start = self.clock.now()
        try:
            proc = await asyncio.create_subprocess_exec(
                self.exe, *QUERY, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
            )
            out, _ = await asyncio.wait_for(proc.communicate(), timeout=10)
        except (OSError, asyncio.TimeoutError):
            return
        t = self.clock.now()
        for gpu, used, total, name in parse_query(out.decode(errors="replace")):
            self.sink(
                {
                    "t": t,
                    "t_start": t_start,
                    "cycle": self.cycle,
                    "gpu": gpu,
                    "name": name,
                    "used_mib": used,
                    "total_mib": total,
                }
            )

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
    sampler = GpuMemorySampler(exe, clock, lambda s: io.submit(rundir.append, GPU_FILE, dict(s)), interval_s)
    sampler.start()
    try:
        yield exe
    finally:
        await sampler.stop()
        io.shutdown(wait=True)


def _read_at(s: GpuMemoryLine) -> float:
    """When the card was read: the middle of the query (older samples carry only its end)."""
    t = float(s["t"])
    return (float(s["t_start"]) + t) / 2 if s.get("t_start") is not None else t


def _in_cycles(mine: list[GpuMemoryLine]) -> list[GpuMemoryLine]:
    """The samples a slope is fitted to, in the order they were read: cycle 0 is token counting before the
    schedule, part of the peak, not of a slope."""
    return sorted((s for s in mine if int(s.get("cycle") or 0) >= 1), key=_read_at)


def _cycle_peaks(judged: list[GpuMemoryLine]) -> dict[int, float]:
    peaks: dict[int, float] = {}
    for s in judged:
        c = int(s["cycle"])
        peaks[c] = max(peaks.get(c, float("-inf")), float(s["used_mib"]))
    return dict(sorted(peaks.items()))


def card_slopes(mine: list[GpuMemoryLine], done_times: Sequence[float] | None) -> dict[str, Slope]:
    """The three slopes of one card's samples in cycles; `done_times` are the finished requests' t_done (None: no
    per-request slope)."""
    judged = _in_cycles(mine)
    at = [_read_at(s) for s in judged]
    used = [float(s["used_mib"]) for s in judged]
    done = sorted(done_times) if done_times is not None else None
    peaks = _cycle_peaks(judged)
    cycles = list(peaks)
    xs = {"second": at, "cycle": [float(s["cycle"]) for s in judged]}
    if done is not None:
        xs["request"] = [float(bisect.bisect_right(done, t)) for t in at]
    slopes: dict[str, Slope] = {
        u: fit_slope(u, xs[u], used, autocorrelated=True) for u in ("second", "request") if u in xs
    }
    slopes.setdefault("request", Slope("request", None, None, len(at), None, 0.0, None))
    # The per-cycle slope and its noise come from the cycle peaks (one independent point a cycle); its fit to
    # the samples, against each sample's cycle, is what ranks it against the other two forms.
    slopes["cycle"] = fit_slope("cycle", [float(c) for c in cycles], [peaks[c] for c in cycles], autocorrelated=False)
    return {u: dataclasses.replace(slopes[u], samples_r2=samples_r2(xs[u], used) if u in xs else None) for u in UNITS}


def card_verdict(slopes: dict[str, Slope], range_mib: float | None, peak_mib: float | None) -> str:
    """`growing` when any slope is clearly above zero, else `falling` when one is clearly below; `flat` when every
    judged slope is within noise and the memory moved little against its peak; `too_few_cycles` when no slope
    could be judged; else `cant_tell`."""
    calls = [s.call for s in slopes.values()]
    if "up" in calls:
        return "growing"
    if "down" in calls:
        return "falling"
    if all(c == "unjudged" for c in calls):
        return "too_few_cycles"
    if range_mib is not None and peak_mib and range_mib <= max(MIN_GROWTH_MIB, FLAT_RANGE_SHARE * peak_mib):
        return "flat"
    return "cant_tell"


def _detail(s: Slope) -> SlopeDetail:
    return {
        "points": s.points,
        "independent_points": None if s.independent is None else round(s.independent, 1),
        "span": s.span,
        "r2": s.r2,
        "samples_r2": s.samples_r2,
        "growth_mib": s.growth,
        "call": s.call,
    }


def _card(mine: list[GpuMemoryLine], done_times: Sequence[float] | None) -> GpuCardJson:
    slopes = card_slopes(mine, done_times)
    in_cycles = [float(s["used_mib"]) for s in _in_cycles(mine)]
    peaks = _cycle_peaks(_in_cycles(mine))
    range_mib = (max(in_cycles) - min(in_cycles)) if in_cycles else None
    peak = max(s["used_mib"] for s in mine)
    # The clear slopes, the form that fits best first: that is the leak's likeliest form.
    leak_by = sorted((u for u in UNITS if slopes[u].call == "up"), key=lambda u: -(slopes[u].samples_r2 or 0.0))
    names = [s.get("name") for s in mine if s.get("name")]
    sec, req, cyc = slopes["second"], slopes["request"], slopes["cycle"]
    return {
        "index": int(mine[0]["gpu"]),
        "name": names[-1] if names else None,
        "peak_mib": peak,
        "total_mib": mine[-1].get("total_mib"),
        "first_mib": mine[0]["used_mib"],
        "last_mib": mine[-1]["used_mib"],
        "range_mib": range_mib,
        "cycles": list(peaks),
        "cycle_peak_mib": list(peaks.values()),
        "slope_mib_per_second": sec.slope,
        "slope_noise_mib_per_second": sec.noise,
        "slope_mib_per_request": req.slope,
        "slope_noise_mib_per_request": req.noise,
        "slope_mib_per_cycle": cyc.slope,
        "slope_noise_mib_per_cycle": cyc.noise,
        "slope_mib_per_hour": None if sec.slope is None else sec.slope * 3600,
        "slope_noise_mib_per_hour": None if sec.noise is None else sec.noise * 3600,
        "growth_mib": sec.growth,  # what the time slope adds over the run's seconds
        "slopes": {u: _detail(slopes[u]) for u in UNITS},
        "leak_by": leak_by,
        "verdict": card_verdict(slopes, range_mib, max(in_cycles) if in_cycles else None),
        "samples": len(mine),
    }


def summarize_gpu(samples: list[dict[str, Any]], done_times: Sequence[float] | None = None) -> dict[str, Any] | None:
    """Per GPU (keyed by index as text): peak, range, the slopes per second, request and cycle with their noise, and
    a verdict. `done_times`: every finished request's t_done, for the per-request slope."""
    if not samples:
        return None
    lines = cast(list[GpuMemoryLine], samples)
    out: dict[str, GpuCardJson] = {}
    for gpu in sorted({int(s["gpu"]) for s in lines}):
        out[str(gpu)] = _card(sorted((s for s in lines if int(s["gpu"]) == gpu), key=lambda s: s["t"]), done_times)
    return out


def done_times(lines: list[RequestLineJson]) -> list[float]:
    """The t_done of every request line that finished (any outcome: a cancelled request ran on the server too)."""
    return [float(t) for r in lines if isinstance(t := r.get("t_done"), (int, float))]


def _num(v: float) -> str:
    a = abs(v)
    return f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 1 else f"{v:.2g}"


def _slope_of(c: GpuCardJson, u: str) -> tuple[float | None, float | None]:
    """A card's slope per `u` (a unit of UNITS) and its noise, None where the card has none."""
    if u == "second":
        return c.get("slope_mib_per_second"), c.get("slope_noise_mib_per_second")
    if u == "request":
        return c.get("slope_mib_per_request"), c.get("slope_noise_mib_per_request")
    if u == "cycle":
        return c.get("slope_mib_per_cycle"), c.get("slope_noise_mib_per_cycle")
    return None, None


def _slope_text(c: GpuCardJson, u: str) -> str | None:
    v, n = _slope_of(c, u)
    if v is None or n is None:
        return None
    hour, hour_noise = c.get("slope_mib_per_hour"), c.get("slope_noise_mib_per_hour")
    if u == "second" and abs(v) < 1 and hour is not None and hour_noise is not None:
        v, n, u = hour, hour_noise, "hour"
    return f"{'+' if v >= 0 else ''}{_num(v)} ± {_num(n)} MiB per {u}"


def _name(c: GpuCardJson) -> str:
    return f"GPU {c['index']}" + (f" ({c['name']})" if c.get("name") else "")


def _span(c: GpuCardJson) -> str:
    second = (c.get("slopes") or {}).get("second")
    secs = second.get("span") if second else None
    return f"over {len(c.get('cycles') or [])} cycles" + (f" ({secs:.0f} s)" if secs else "")


def _describe_leak(c: GpuCardJson) -> str:
    by = c.get("leak_by") or []
    clear = [t for t in (_slope_text(c, u) for u in by) if t]
    text = f"{_name(c)}: " + ", ".join(clear) if clear else f"{_name(c)}"
    return text + f", peak {c['peak_mib']:.0f} MiB {_span(c)}"


def _upper_growth(c: GpuCardJson) -> float:
    """The most growth over the run that any judged slope's interval allows (MiB)."""
    ups = [0.0]
    for u, d in (c.get("slopes") or {}).items():
        v, n = _slope_of(c, u)
        if v is not None and n is not None:
            ups.append((v + n) * d["span"])
    return max(ups)


def _describe_unsure(c: GpuCardJson) -> str:
    if c.get("verdict") == "too_few_cycles":
        return f"{_name(c)}: too few samples in cycles to fit a slope (more cycles would tell)"
    figures = ", ".join(t for t in (_slope_text(c, u) for u in UNITS) if t)
    rng, peak = c.get("range_mib"), c.get("peak_mib")
    moved = (
        f"; its memory moved {rng:.0f} MiB ({100 * rng / peak:.0f}% of its peak)" if rng is not None and peak else ""
    )
    upper = _upper_growth(c)
    bound = f" and the slopes allow up to {upper:.0f} MiB of growth" if upper > 0 else ""
    return (
        f"{_name(c)}: no slope clearly above zero ({figures}) {_span(c)}{moved}{bound}; more cycles "
        f"(this run had {len(c.get('cycles') or [])}) or a longer run would tell"
    )


class LeakVerdictJson(TypedDict):
    """A stress summary's `gpu_memory_verdict` (`leak_verdict`), in the order written."""

    leak_suspected_on: list[int]
    cards_growing: int
    cards: int
    cant_tell_on: list[int]
    verdict: str
    evidence: str


def leak_verdict(cards: dict[str, GpuCardJson] | None) -> LeakVerdictJson | None:
    """Which cards' memory grows beyond noise (a possible leak, named with its figures), which cannot be told, and
    which are flat; None without samples. `cards` as `summarize_gpu` gives them or summary.json holds them."""
    if not cards:
        return None
    ordered = [cards[k] for k in sorted(cards, key=int)]
    growing = [c for c in ordered if c.get("verdict") == "growing"]
    unsure = [c for c in ordered if c.get("verdict") in ("cant_tell", "too_few_cycles")]
    parts = []
    if growing:
        where = "on every card: " if len(growing) == len(ordered) > 1 else "on "
        parts.append("possible leak " + where + "; ".join(_describe_leak(c) for c in growing))
    for i, c in enumerate(unsure):
        parts.append(("can't tell on " if growing or i else "can't tell: ") + _describe_unsure(c))
    if parts:
        others = [c for c in ordered if c not in growing and c not in unsure]
        if others:
            parts.append(", ".join(f"GPU {c['index']} {c['verdict'].replace('_', ' ')}" for c in others))
    elif any(c.get("verdict") == "falling" for c in ordered):
        parts.append(
            "no leak: no card's memory grows; "
            + ", ".join(
                f"GPU {c['index']} {c['verdict']}"
                + (f" ({_slope_text(c, 'second')})" if c["verdict"] == "falling" else "")
                for c in ordered
            )
        )
    else:
        parts.append("no leak: every card's memory is flat (every slope within noise, little range against its peak)")
    # `cards_growing` is a number so that a gate rule can hold it at 0.
    return {
        "leak_suspected_on": [c["index"] for c in growing],
        "cards_growing": len(growing),
        "cards": len(ordered),
        "cant_tell_on": [c["index"] for c in unsure],
        "verdict": "; ".join(parts),
        "evidence": EVIDENCE,
    }


def peaks_line(cards: dict[str, GpuCardJson] | None) -> str | None:
    """One line for a command's printed summary: each card's peak (and its verdict when cycles were sampled)."""
    if not cards:
        return None
    parts = []
    for k in sorted(cards, key=int):
        c = cards[k]
        judged = c.get("cycles")
        parts.append(
            f"GPU {c['index']} peak {c['peak_mib']:.0f} MiB"
            + (f" ({c['verdict'].replace('_', ' ')})" if judged else "")
        )
    return "GPU memory: " + ", ".join(parts)
