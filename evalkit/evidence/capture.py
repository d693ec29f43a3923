"""What the server says during a run: `/metrics` snapshots and samples, and its log, captured beside the requests.

One `EvidenceCapture` per run: `start()` takes the `before` snapshot and starts following the log, `snapshot(label)`
marks a window (bench prompts), `end()` takes the `after` snapshot and stops everything. `evidence_summary(path)`
computes summary.json's `server_metrics` and `server_log` from the run directory's files alone; the verdicts read
the same files back as `evalkit.evidence.server_evidence.ServerEvidence`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict, cast

from evalkit.clock import Clock
from evalkit.config.profiles import ServerProfile
from evalkit.config.target import EvidenceOptions
from evalkit.evidence.gpu_telemetry import (
    TELEMETRY_FILE,
    TelemetryLine,
    TelemetrySampler,
    TelemetrySummary,
    open_reader,
    summarize_telemetry,
)
from evalkit.evidence.log_lines import LogLine
from evalkit.evidence.request_lines import RequestLineJson
from evalkit.evidence.server_log import LOG_FILE, LogFollower, LogPatterns, LogSummary, summarize_log
from evalkit.evidence.server_metrics import (
    METRICS_FILE,
    MetricsRecorder,
    MetricsSummary,
    ScrapeLine,
    metrics_url,
    summarize_metrics,
)
from evalkit.evidence.spec_decode import SpecSummary, spec_summary
from evalkit.runs.rundir import MANIFEST, RunDir, read_json_object, read_jsonl


class EvidenceSummary(TypedDict, total=False):
    """What `evidence_summary` adds to summary.json, each part only where the run has its evidence."""

    server_metrics: MetricsSummary
    spec_decode: SpecSummary
    gpu_telemetry: TelemetrySummary
    server_log: LogSummary


class EvidenceCapture:
    """Captures `/metrics` and the server log into one run directory."""

    def __init__(
        self,
        rundir: RunDir,
        base_url: str,
        clock: Clock,
        *,
        metrics: bool = True,
        sample_s: float = 0.0,
        log_path: Path | None = None,
        log_patterns: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        secrets: tuple[str | None, ...] = (),
    ) -> None:
        self.rundir = rundir
        self.sample_s = sample_s
        self.metrics = (
            MetricsRecorder(base_url, clock, lambda name, line: rundir.append(name, dict(line)), headers)
            if metrics
            else None
        )
        self.log = (
            LogFollower(
                log_path,
                clock,
                LogPatterns.from_profile(log_patterns),
                lambda name, line: rundir.append(name, dict(line)),
                secrets=secrets,
            )
            if log_path is not None
            else None
        )
        self._clock = clock
        self.gpu: TelemetrySampler | None = None  # the GPU's own figures (NVML / nvidia-smi), when there is one
        self._ended = False

    async def start(self) -> None:
        """Record where the evidence comes from, follow the log, take the `before` snapshot, start sampling."""
        self.rundir.update_manifest(
            server_metrics_url=self.metrics.url if self.metrics else None,
            server_log=str(self.log.path) if self.log else None,
        )
        if self.log is not None:
            self.log.start()
        reader = open_reader()
        self.rundir.update_manifest(gpu_telemetry=reader.source if reader else None)
        if reader is not None:
            self.gpu = TelemetrySampler(reader, self._clock, lambda rec: self.rundir.append(TELEMETRY_FILE, dict(rec)))
            self.gpu.start()
        if self.metrics is not None:
            await self.metrics.snapshot("before")
            self.metrics.start_sampling(self.sample_s)

    async def snapshot(self, label: str) -> None:
        """One labelled scrape (no-op without metrics)."""
        if self.metrics is not None:
            await self.metrics.snapshot(label)

    async def end(self) -> None:
        """Stop sampling, take the `after` snapshot, stop following the log (safe to call twice)."""
        if self._ended:
            return
        self._ended = True
        self._stop_gpu()
        if self.metrics is not None:
            await self.metrics.close()
            await self.metrics.snapshot("after")
            await self.metrics.close()
        if self.log is not None:
            self.log.stop()

    def _stop_gpu(self) -> None:
        if self.gpu is not None:
            self.gpu.stop()
            self.gpu = None

    async def close(self) -> None:
        """Stop whatever still runs, without a final snapshot (an aborted run)."""
        self._stop_gpu()
        if self.metrics is not None:
            await self.metrics.close()
        if self.log is not None:
            self.log.stop()
        self._ended = True


# Sampling through a run by default only where the load changes under the run's feet.
DEFAULT_SAMPLE_S = {"stress": 1.0}


def evidence_capture(
    options: EvidenceOptions, kind: str, rundir: RunDir, profile: ServerProfile, key: str | None, clock: Clock
) -> EvidenceCapture:
    """The evidence capture the run's options (`--server-log`, `--metrics-interval`, `--no-metrics`) ask for."""
    interval = options.metrics_interval
    sample_s = DEFAULT_SAMPLE_S.get(kind, 0.0) if interval is None else max(0.0, interval)
    headers = {"Authorization": f"Bearer {key}"} if key else None
    return EvidenceCapture(
        rundir,
        profile.base_url or "",
        clock,
        metrics=options.metrics,
        sample_s=sample_s,
        log_path=options.server_log,
        log_patterns=profile.log_patterns,
        headers=headers,
        secrets=(key,),
    )


def evidence_summary(run_dir: Path | str) -> EvidenceSummary:
    """`server_metrics` and `server_log` for summary.json, from the run directory's files alone."""
    path = Path(run_dir)
    man_path = path / MANIFEST
    manifest = read_json_object(man_path) if man_path.exists() else {}
    out: EvidenceSummary = {}
    url = manifest.get("server_metrics_url")
    lines = cast(list[ScrapeLine], read_jsonl(path / METRICS_FILE))
    if url or lines:
        out["server_metrics"] = summarize_metrics(
            lines, url or (metrics_url(manifest.get("server", {}).get("base_url") or ""))
        )
    requests = cast(list[RequestLineJson], read_jsonl(path / "requests.jsonl"))
    spec = spec_summary(lines, requests)  # a server without /metrics may time drafts
    if spec is not None:
        out["spec_decode"] = spec
    gpu = _gpu_summary(path)
    if gpu is not None:
        out["gpu_telemetry"] = gpu
    if manifest.get("server_log") or (path / LOG_FILE).exists():
        out["server_log"] = summarize_log(cast(list[LogLine], read_jsonl(path / LOG_FILE)), manifest.get("server_log"))
    return out


def _gpu_summary(path: Path) -> TelemetrySummary | None:
    """`gpu_telemetry`: the run's GPU figures, energy per output token overall and per bench prompt."""
    samples = cast(list[TelemetryLine], read_jsonl(path / TELEMETRY_FILE))
    if not samples:
        return None
    requests = cast(list[RequestLineJson], read_jsonl(path / "requests.jsonl"))
    groups: dict[str, list[RequestLineJson]] = {}
    for r in requests:
        if r.get("phase") == "single" and r.get("prompt"):
            groups.setdefault(str(r["prompt"]), []).append(r)
        elif r.get("phase") == "concurrent":
            groups.setdefault("concurrent", []).append(r)
    return summarize_telemetry(samples, [r for r in requests if r.get("phase") != "warmup"], groups)
