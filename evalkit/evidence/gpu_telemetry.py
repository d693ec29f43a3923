"""The GPU's own figures through a run: power, energy, SM utilization and memory per card, and energy per token.

Read from NVML (`nvidia-ml-py`, imported as `pynvml`): power (`nvmlDeviceGetPowerUsage`), the card's energy counter
since the driver loaded (`nvmlDeviceGetTotalEnergyConsumption`, mJ: energy over a window is its difference, so
sampling gaps lose nothing), SM utilization (`nvmlDeviceGetUtilizationRates().gpu`, the share of the last sample
period in which a kernel ran) and memory used. Without NVML, `nvidia-smi --query-gpu=...` (power.draw,
utilization.gpu, memory.used); energy is then the power integrated over the samples (trapezoids). Each sample is a
line of `gpu_telemetry.jsonl`; `summarize_telemetry` turns them and the run's requests into summary.json's
`gpu_telemetry`: per card, and the energy per output token over the requests' time (idle power included: it is
what the box drew while serving). `$EVALKIT_GPU_TELEMETRY` = `off`, `nvml` or `smi` forces a source.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from statistics import mean
from typing import Any, Protocol, TypedDict

from evalkit.clock import Clock
from evalkit.evidence.request_lines import RequestLineJson

TELEMETRY_FILE = "gpu_telemetry.jsonl"
SMI_QUERY = [
    "--query-gpu=index,power.draw,utilization.gpu,memory.used,memory.total,name",
    "--format=csv,noheader,nounits",
]
NVML_INTERVAL_S = 0.25  # NVML reads cost microseconds
SMI_INTERVAL_S = 1.0  # an nvidia-smi call costs tens of milliseconds of CPU


class GpuReading(TypedDict):
    """One card's figures from one read (a `Reader`), as `gpu_telemetry.jsonl` holds them after `t` and `source`."""

    gpu: int
    name: str | None
    power_w: float | None
    energy_j: float | None
    sm_util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None


class TelemetryLine(GpuReading):
    """One line of `gpu_telemetry.jsonl`: when it was read, by which source, and the card's figures (written with `t`
    and `source` first: a TypedDict's base keys come first only in its type, never in the dict written)."""

    t: float
    source: str


class MeanMax(TypedDict):
    """Mean and max of a card's figure over the run."""

    mean: float
    max: float


class CardTelemetry(TypedDict):
    """One card of a summary's `gpu_telemetry.cards`, in the order written."""

    gpu: int
    name: str | None
    power_w: MeanMax | None
    sm_util_pct: MeanMax | None
    mem_used_mib_max: float | None
    energy_j: float | None
    samples: int


class EnergyPerToken(TypedDict):
    """The energy over a set of requests' time and per output token (`gpu_telemetry.run`, `per_label`)."""

    energy_j: float
    output_tokens: int
    j_per_output_token: float
    seconds: float
    power_w_mean: float | None


class _TelemetryBase(TypedDict):
    source: str | None
    energy_from: str
    cards: list[CardTelemetry]
    run: EnergyPerToken | None


class TelemetrySummary(_TelemetryBase, total=False):
    """summary.json's `gpu_telemetry` (`summarize_telemetry`), in the order written; `per_label` only with groups."""

    per_label: dict[str, EnergyPerToken]


class Reader(Protocol):
    """One source of per-card samples."""

    source: str
    interval_s: float

    def read(self) -> list[GpuReading]:
        """One sample per card (without the time stamp)."""
        ...

    def close(self) -> None:
        """Release the source."""
        ...


class NvmlReader:
    """NVML through `pynvml` (the `nvidia-ml-py` package)."""

    source = "nvml"
    interval_s = NVML_INTERVAL_S

    def __init__(self) -> None:
        import pynvml

        self._nv = pynvml
        pynvml.nvmlInit()
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]

    def _try(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self._nv.NVMLError:
            return None

    def read(self) -> list[GpuReading]:
        out: list[GpuReading] = []
        for i, h in enumerate(self._handles):
            nv = self._nv
            power = self._try(nv.nvmlDeviceGetPowerUsage, h)
            energy = self._try(nv.nvmlDeviceGetTotalEnergyConsumption, h)
            util = self._try(nv.nvmlDeviceGetUtilizationRates, h)
            mem = self._try(nv.nvmlDeviceGetMemoryInfo, h)
            name = self._try(nv.nvmlDeviceGetName, h)
            out.append(
                {
                    "gpu": i,
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "power_w": power / 1000 if power is not None else None,
                    "energy_j": energy / 1000 if energy is not None else None,
                    "sm_util_pct": float(util.gpu) if util is not None else None,
                    "mem_used_mib": mem.used / 2**20 if mem is not None else None,
                    "mem_total_mib": mem.total / 2**20 if mem is not None else None,
                }
            )
        return out

    def close(self) -> None:
        self._try(self._nv.nvmlShutdown)


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # [N/A], [Not Supported]


class SmiReader:
    """`nvidia-smi --query-gpu` (no energy counter: energy is integrated from power)."""

    source = "nvidia-smi"
    interval_s = SMI_INTERVAL_S

    def __init__(self, exe: str) -> None:
        self.exe = exe

    def read(self) -> list[GpuReading]:
        try:
            out = subprocess.run([self.exe, *SMI_QUERY], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        return parse_smi(out)

    def close(self) -> None:
        pass


def parse_smi(text: str) -> list[GpuReading]:
    """Rows of `nvidia-smi --query-gpu=index,power.draw,utilization.gpu,memory.used,memory.total,name`."""
    rows: list[GpuReading] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5 or _num(parts[0]) is None:
            continue
        rows.append(
            {
                "gpu": int(float(parts[0])),
                "name": ", ".join(parts[5:]) or None,
                "power_w": _num(parts[1]),
                "energy_j": None,
                "sm_util_pct": _num(parts[2]),
                "mem_used_mib": _num(parts[3]),
                "mem_total_mib": _num(parts[4]),
            }
        )
    return rows


def open_reader(env: dict[str, str] | None = None) -> Reader | None:
    """NVML when it loads, else nvidia-smi on the PATH, else None (`$EVALKIT_GPU_TELEMETRY` may force one)."""
    want = (env if env is not None else os.environ).get("EVALKIT_GPU_TELEMETRY", "auto").lower()
    if want == "off":
        return None
    if want in ("auto", "nvml"):
        try:
            return NvmlReader()
        except Exception:  # noqa: BLE001 - no module, no driver, no device: fall back
            if want == "nvml":
                return None
    exe = shutil.which("nvidia-smi")
    return SmiReader(exe) if exe else None


class TelemetrySampler:
    """A thread that samples every card every `interval_s` and hands each sample, stamped, to `sink`; a failed
    read loses a sample, never the run, and the thread keeps NVML and nvidia-smi off the timing event loop."""

    def __init__(
        self, reader: Reader, clock: Clock, sink: Callable[[TelemetryLine], None], interval_s: float | None = None
    ) -> None:
        self.reader = reader
        self.clock = clock
        self.sink = sink
        self.interval_s = interval_s or reader.interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-telemetry", daemon=True)

    def _once(self) -> None:
        try:
            rows = self.reader.read()
        except Exception:  # noqa: BLE001 - a driver hiccup loses one sample
            return
        t = self.clock.now()
        for r in rows:
            line: TelemetryLine = {"t": t, "source": self.reader.source, **r}
            self.sink(line)

    def _loop(self) -> None:
        self._once()
        while not self._stop.wait(self.interval_s):
            self._once()

    def start(self) -> None:
        """Begin sampling."""
        self._thread.start()

    def stop(self) -> None:
        """Take one last sample and stop."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=15)
        self._once()
        self.reader.close()


@dataclass(frozen=True)
class _Card:
    gpu: int
    samples: list[TelemetryLine]

    def cumulative(self) -> list[tuple[float, float]]:
        """(t, energy J) from the card's counter, or power integrated over the samples when it has none."""
        pts = [(s["t"], e) for s in self.samples if isinstance(e := s.get("energy_j"), (int, float))]
        if len(pts) >= 2:
            return pts
        out: list[tuple[float, float]] = []
        acc = 0.0
        prev: tuple[float, float] | None = None
        for s in self.samples:
            p = s.get("power_w")
            if not isinstance(p, (int, float)):
                continue
            if prev is not None:
                acc += (s["t"] - prev[0]) * (p + prev[1]) / 2
            out.append((s["t"], acc))
            prev = (s["t"], p)
        return out


def _at(cum: list[tuple[float, float]], t: float) -> float | None:
    """The cumulative energy at t, linear between samples; None outside the sampled span."""
    if not cum or t < cum[0][0] - 1e-6 or t > cum[-1][0] + 1e-6:
        return None
    for (t0, e0), (t1, e1) in zip(cum, cum[1:]):
        if t0 <= t <= t1:
            return e0 if t1 == t0 else e0 + (e1 - e0) * (t - t0) / (t1 - t0)
    return cum[-1][1] if t >= cum[-1][0] else cum[0][1]


def energy_between(samples: Iterable[TelemetryLine], windows: list[tuple[float, float]]) -> float | None:
    """Joules all cards drew in the union-free list of windows [(t0, t1)]; None when a window was not sampled."""
    cards: dict[int, list[TelemetryLine]] = {}
    for s in samples:
        cards.setdefault(int(s.get("gpu") or 0), []).append(s)
    total = 0.0
    for gpu, rows in cards.items():
        cum = _Card(gpu, sorted(rows, key=lambda s: s["t"])).cumulative()
        for t0, t1 in windows:
            a, b = _at(cum, t0), _at(cum, t1)
            if a is None or b is None:
                return None
            total += b - a
    return total


def _merge(windows: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(windows):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _per_token(samples: list[TelemetryLine], requests: list[RequestLineJson]) -> EnergyPerToken | None:
    ok = [
        (r, sent, done)
        for r in requests
        if r.get("status") == "ok"
        and isinstance(sent := r.get("t_sent"), (int, float))
        and isinstance(done := r.get("t_done"), (int, float))
    ]
    tokens = sum(r.get("completion_tokens") or 0 for r, _, _ in ok)
    if not ok or not tokens:
        return None
    windows = _merge([(sent, done) for _, sent, done in ok])
    joules = energy_between(samples, windows)
    if joules is None:
        return None
    busy = sum(b - a for a, b in windows)
    return {
        "energy_j": joules,
        "output_tokens": tokens,
        "j_per_output_token": joules / tokens,
        "seconds": busy,
        "power_w_mean": joules / busy if busy else None,
    }


def _figure(s: TelemetryLine, key: str) -> float | None:
    """A sample's power, SM utilization or memory used by its key."""
    if key == "power_w":
        return s.get("power_w")
    if key == "sm_util_pct":
        return s.get("sm_util_pct")
    if key == "mem_used_mib":
        return s.get("mem_used_mib")
    raise KeyError(key)


def _stat(vals: list[float]) -> MeanMax | None:
    return {"mean": mean(vals), "max": max(vals)} if vals else None


def summarize_telemetry(
    samples: list[TelemetryLine],
    requests: list[RequestLineJson],
    groups: dict[str, list[RequestLineJson]] | None = None,
) -> TelemetrySummary | None:
    """summary.json's `gpu_telemetry`: per card power / SM utilization / memory, and energy per output token over
    the requests' time (all of them, and each named group of requests, such as a bench prompt); None unsampled."""
    if not samples:
        return None
    cards: list[CardTelemetry] = []
    for gpu in sorted({int(s.get("gpu") or 0) for s in samples}):
        mine = sorted((s for s in samples if int(s.get("gpu") or 0) == gpu), key=lambda s: s["t"])

        def vals(key: str, mine: list[TelemetryLine] = mine) -> list[float]:
            return [v for s in mine if isinstance(v := _figure(s, key), (int, float))]

        cum = _Card(gpu, mine).cumulative()
        cards.append(
            {
                "gpu": gpu,
                "name": next((s["name"] for s in mine if s.get("name")), None),
                "power_w": _stat(vals("power_w")),
                "sm_util_pct": _stat(vals("sm_util_pct")),
                "mem_used_mib_max": max(vals("mem_used_mib"), default=None),
                "energy_j": cum[-1][1] - cum[0][1] if len(cum) >= 2 else None,
                "samples": len(mine),
            }
        )
    has_counter = any(isinstance(s.get("energy_j"), (int, float)) for s in samples)
    out: TelemetrySummary = {
        "source": samples[0].get("source"),
        "energy_from": "the cards' energy counters (NVML)" if has_counter else "power integrated over the samples",
        "cards": cards,
        "run": _per_token(samples, requests),
    }
    if groups:
        out["per_label"] = {k: v for k, rs in groups.items() if (v := _per_token(samples, rs)) is not None}
    return out


def _mean(m: MeanMax | None) -> float:
    return (m.get("mean") if m else None) or 0


def telemetry_line(summary: TelemetrySummary | None) -> str | None:
    """One line for the terminal: power, J/token, SM utilization and memory per card (`summary` as
    `summarize_telemetry` gives it or summary.json holds it)."""
    if not summary:
        return None
    t = summary
    run = t.get("run")
    cards = "; ".join(
        f"GPU {c['gpu']}: {_mean(c.get('power_w')):.0f} W mean, "
        f"SM {_mean(c.get('sm_util_pct')):.0f}%, "
        f"{(c.get('mem_used_mib_max') or 0):,.0f} MiB max"
        for c in t.get("cards") or []
    )
    jpt = (
        f"{run['j_per_output_token']:.3g} J/output token ({run['energy_j']:.0f} J, {run['output_tokens']} tokens)"
        if run and run.get("j_per_output_token") is not None
        else "J/token: -"
    )
    return f"GPU ({t.get('source')}): {jpt}; {cards}"
