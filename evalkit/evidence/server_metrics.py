"""The server's Prometheus `/metrics`: scrape, flatten to `series -> value`, record in `metrics.jsonl`, summarize.

`metrics.jsonl` holds one line per scrape: `{"t", "label", "ok", "error", "series"}`; `t` is evalkit's clock when
the answer arrived, `label` says why it was taken (`before`, `after`, `sample`, `before:code`, `after:code` ...).
Series keys are Prometheus text form, `name` or `name{k="v",...}` with labels sorted by key. A server without
`/metrics` (404, refused, garbage) gets an `ok: false` line and one warning on standard error; the run goes on.
Works with vLLM (`vllm:*`), SGLang (`sglang:*`) and llama.cpp (`llamacpp:*`, launched with `--metrics`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypedDict

from prometheus_client.parser import text_string_to_metric_families

from evalkit.addresses import server_root
from evalkit.client import auxiliary
from evalkit.clock import Clock
from evalkit.redact import excerpt

METRICS_FILE = "metrics.jsonl"
# A scrape reads at most this much (vLLM's whole /metrics is ~200 KB): parsing a 100 MB answer took minutes.
MAX_METRICS_BYTES = 4 * 1024 * 1024
# Cumulative series by Prometheus naming: counters end in _total, histograms and summaries count in _count/_sum.
_COUNTER_SUFFIXES = ("_total", "_count", "_sum")
_BUCKET = "_bucket"


class MetricsError(Exception):
    """The server's answer was not Prometheus text."""


class ScrapeLine(TypedDict):
    """One line of `metrics.jsonl` (`Scrape.to_json`), in the order written."""

    t: float
    label: str
    ok: bool
    error: str | None
    series: dict[str, float]


class GaugeRange(TypedDict):
    """A gauge's min / max / last over a run's scrapes."""

    min: float
    max: float
    last: float


class _MetricsCounts(TypedDict):
    """The keys every `server_metrics` has."""

    url: str | None
    available: bool
    scrapes: int
    ok: int
    failed: int
    first_error: str | None
    windows: int
    counters: dict[str, float]
    gauges: dict[str, GaugeRange]


class MetricsSummary(_MetricsCounts, total=False):
    """summary.json's `server_metrics` (`summarize_metrics`), in the order written; `per_label` only with labelled
    windows (bench prompts)."""

    per_label: dict[str, dict[str, float]]


@dataclass(frozen=True)
class Scrape:
    """One `/metrics` scrape as `metrics.jsonl` holds it."""

    t: float
    label: str
    ok: bool
    error: str | None = None
    series: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> ScrapeLine:
        """The line written to `metrics.jsonl`."""
        return {"t": self.t, "label": self.label, "ok": self.ok, "error": self.error, "series": dict(self.series)}


def metrics_url(base_url: str) -> str:
    """`/metrics` at the server root: `http://h:p/v1` -> `http://h:p/metrics`."""
    return server_root(base_url) + "/metrics"


def series_key(name: str, labels: dict[str, str]) -> str:
    """Prometheus text form of one series, labels sorted by key."""
    if not labels:
        return name
    inner = ",".join(f'{k}="{_escape(labels[k])}"' for k in sorted(labels))
    return f"{name}{{{inner}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def parse_metrics(text: str) -> dict[str, float]:
    """Flatten Prometheus exposition text to `series -> value`; text that is not Prometheus raises MetricsError."""
    out: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[series_key(s.name, dict(s.labels))] = float(s.value)
    except (ValueError, TypeError, IndexError, KeyError) as e:
        raise MetricsError(f"not Prometheus text: {_one_line(str(e))}") from None
    if not out:
        raise MetricsError("no metric series in the answer")
    return out


def _one_line(text: str, limit: int = 200) -> str:
    return excerpt(text, limit)


async def scrape(
    session: auxiliary.ClientSession, url: str, clock: Clock, label: str, timeout_s: float = 5.0
) -> Scrape:
    """GET `url` and parse it; any failure is a `Scrape` with `ok=False` and a one-line error, never an exception."""
    try:
        async with session.get(url, timeout=auxiliary.ClientTimeout(total=timeout_s)) as resp:
            body = await auxiliary.read_text(resp, MAX_METRICS_BYTES)
            t = clock.now()
            if resp.status != 200:
                return Scrape(t, label, False, f"HTTP {resp.status} from GET {url}")
        return Scrape(t, label, True, None, parse_metrics(body))
    except MetricsError as e:
        return Scrape(clock.now(), label, False, str(e))
    except (auxiliary.ClientError, asyncio.TimeoutError, OSError) as e:
        return Scrape(clock.now(), label, False, _one_line(f"GET {url}: {type(e).__name__}: {e}"))


class MetricsRecorder:
    """Scrapes one server's `/metrics` into a run's `metrics.jsonl`: labelled snapshots and a background sampler."""

    def __init__(
        self,
        base_url: str,
        clock: Clock,
        append: Callable[[str, ScrapeLine], None],
        headers: dict[str, str] | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.url = metrics_url(base_url)
        self.clock = clock
        self._append = append
        self._headers = headers or {}
        self._warn = warn or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self._warned = False
        self._ok = 0
        self._failed = 0
        self._session: auxiliary.ClientSession | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def snapshot(self, label: str) -> Scrape:
        """Scrape once, append the line, warn once per run when the server has no usable `/metrics`."""
        if self._session is None:
            self._session = auxiliary.session(self._headers)
        s = await scrape(self._session, self.url, self.clock, label)
        self._append(METRICS_FILE, s.to_json())
        self._ok += s.ok
        self._failed += not s.ok
        # A scrape missed now and then (one timeout in 74 on a busy GPU server) is a count in the summary, not a
        # message: say so only when the server never answered, or when most scrapes failed.
        if not s.ok and not self._warned and (self._ok == 0 or (self._failed > self._ok and self._failed >= 3)):
            self._warned = True
            if self._ok == 0:
                self._warn(f"warning: server metrics unavailable ({s.error}); recorded as such, the run goes on")
            else:
                self._warn(
                    f"warning: most /metrics scrapes failed ({self._failed} of {self._ok + self._failed}; "
                    f"last: {s.error}); the run goes on"
                )
        return s

    def start_sampling(self, interval_s: float, label: str = "sample") -> None:
        """Scrape every `interval_s` seconds in the background until `close()`."""
        if interval_s > 0 and self._sampler is None:
            self._sampler = asyncio.create_task(self._sample(interval_s, label))

    async def _sample(self, interval_s: float, label: str) -> None:
        while not self._stop.is_set():
            await self.snapshot(label)
            try:
                await asyncio.wait_for(self._stop.wait(), interval_s)
            except asyncio.TimeoutError:
                pass

    async def close(self) -> None:
        """Stop the sampler and close the HTTP session."""
        self._stop.set()
        if self._sampler is not None:
            await self._sampler
            self._sampler = None
        if self._session is not None:
            await self._session.close()
            self._session = None


def is_counter(series: str) -> bool:
    """Cumulative by name (`_total`, `_count`, `_sum`); histogram buckets are counted apart."""
    name = series.split("{", 1)[0]
    return name.endswith(_COUNTER_SUFFIXES) or name.endswith(_BUCKET)


def is_gauge(series: str) -> bool:
    """Everything that is not cumulative (and not a `_created` timestamp)."""
    name = series.split("{", 1)[0]
    return not is_counter(series) and not name.endswith("_created")


def window_pairs(lines: Iterable[ScrapeLine], before: str, after: str) -> list[tuple[ScrapeLine, ScrapeLine]]:
    """(before, after) scrape pairs: each `before` line with the next `after` line, both ok."""
    pairs: list[tuple[ScrapeLine, ScrapeLine]] = []
    open_before: ScrapeLine | None = None
    for line in lines:
        if line.get("label") == before:
            open_before = line if line.get("ok") else None
        elif line.get("label") == after and open_before is not None:
            if line.get("ok"):
                pairs.append((open_before, line))
            open_before = None
    return pairs


def counter_deltas(pairs: list[tuple[ScrapeLine, ScrapeLine]], buckets: bool = False) -> dict[str, float]:
    """Counter increase summed over the windows; a counter that went down (server restart) counts from zero."""
    out: dict[str, float] = {}
    for b, a in pairs:
        for key, v_after in a["series"].items():
            if not is_counter(key) or (not buckets and key.split("{", 1)[0].endswith(_BUCKET)):
                continue
            v_before = b["series"].get(key, 0.0)
            delta = v_after - v_before if v_after >= v_before else v_after
            out[key] = out.get(key, 0.0) + delta
    return dict(sorted(out.items()))


def gauge_ranges(
    lines: Iterable[ScrapeLine], t_from: float | None = None, t_to: float | None = None
) -> dict[str, GaugeRange]:
    """min / max / last of every gauge over the ok scrapes taken between `t_from` and `t_to` (inclusive)."""
    out: dict[str, GaugeRange] = {}
    for line in lines:
        t = line.get("t") or 0.0
        if not line.get("ok") or (t_from is not None and t < t_from) or (t_to is not None and t > t_to):
            continue
        for key, v in line["series"].items():
            if not is_gauge(key):
                continue
            g = out.setdefault(key, {"min": v, "max": v, "last": v})
            g["min"], g["max"], g["last"] = min(g["min"], v), max(g["max"], v), v
    return dict(sorted(out.items()))


def summarize_metrics(lines: list[ScrapeLine], url: str | None = None) -> MetricsSummary:
    """summary.json's `server_metrics`: scrape counts, counter deltas before -> after, gauge ranges in between."""
    ok = [ln for ln in lines if ln.get("ok")]
    failed = [ln for ln in lines if not ln.get("ok")]
    pairs = window_pairs(lines, "before", "after")
    t_from = pairs[0][0]["t"] if pairs else None
    t_to = pairs[-1][1]["t"] if pairs else None
    out: MetricsSummary = {
        "url": url,
        "available": bool(ok),
        "scrapes": len(lines),
        "ok": len(ok),
        "failed": len(failed),
        "first_error": failed[0].get("error") if failed else None,
        "windows": len(pairs),
        "counters": counter_deltas(pairs),
        "gauges": gauge_ranges(lines, t_from, t_to),
    }
    prompts = sorted({ln["label"].split(":", 1)[1] for ln in lines if str(ln.get("label", "")).startswith("before:")})
    if prompts:
        out["per_label"] = {p: counter_deltas(window_pairs(lines, f"before:{p}", f"after:{p}")) for p in prompts}
    return out
