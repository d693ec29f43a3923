"""`evalkit bench` as one measurement of a run session: the planned prompts measured, the summary, the exit code.

`BenchMeasurement(plan)` is what `evalkit.session.measurement.run_measurement` runs: the run's manifest fields and
defining options come from the plan; `measure` sends the warmup and the measured requests (`evalkit.bench.run_bench`),
and summarizes them with what the server said about itself (its /metrics windows where it sent no `timings`, its log,
its GPU memory) and the client's own lag.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from evalkit.bench.throughput import BenchPlan, left_failed, measurements, run_bench, summarize
from evalkit.client.field_support import length_fields, length_state, unforced_words
from evalkit.client.lag import client_lag
from evalkit.evidence.capture import evidence_summary
from evalkit.evidence.gpu_memory import GPU_FILE, sample_gpu_memory, summarize_gpu
from evalkit.evidence.metrics_rates import COMBINED_SOURCE, SOURCE, combined_decode_rate, decode_rate
from evalkit.evidence.prefix_cache_counters import hit_rate
from evalkit.evidence.server_metrics import METRICS_FILE
from evalkit.progress import Progress
from evalkit.runs.failures import count_failures, failure_line
from evalkit.runs.json_value import JsonValue
from evalkit.runs.rundir import REQUESTS
from evalkit.runs.schemas import written_record
from evalkit.session.context import RunContext
from evalkit.session.measurement import Measured


@dataclass(frozen=True)
class BenchMeasurement:
    """One bench run of `plan`."""

    plan: BenchPlan
    kind: str = "bench"
    scope: dict[str, JsonValue] | None = None

    @property
    def manifest(self) -> dict[str, JsonValue]:
        plan = self.plan
        return {
            "bench": {
                "prompts": [p.name for p in plan.prompts],
                "runs": plan.runs,
                "max_tokens": plan.max_tokens,
                "concurrency": plan.concurrency,
                "ignore_eos": plan.ignore_eos,
            }
        }

    @property
    def options(self) -> dict[str, JsonValue]:
        """The flags that define a bench run: a resume with any of them different would mix two measurements."""
        plan = self.plan
        texts = hashlib.sha256("\0".join(f"{p.name}\0{p.text}" for p in plan.prompts).encode()).hexdigest()[:16]
        return {
            "--max-tokens": plan.max_tokens,
            "--runs": plan.runs,
            "--concurrency": plan.concurrency,
            "--prompts": {"names": [p.name for p in plan.prompts], "sha256": texts},
            "--no-ignore-eos": not plan.ignore_eos,
            **(
                {"--until-sure": {"margin": plan.until_sure_margin, "max_runs": plan.most_runs}}
                if plan.until_sure_margin is not None
                else {}
            ),
        }

    def total(self) -> int:
        """Requests measured (the progress bar's length)."""
        plan = self.plan
        n = plan.most_runs
        return n * len(plan.prompts) + (n * plan.concurrency if plan.concurrency > 1 else 0)

    async def measure(self, ctx: RunContext) -> Measured:
        support = getattr(ctx.client.preflight, "fields", None)
        forced, mode = length_fields(support, self.plan.max_tokens, self.plan.ignore_eos)
        plan = replace(
            self.plan,
            length_body=tuple(forced.items()),
            length_mode=mode,
            length_why=unforced_words(support, self.plan.ignore_eos),
            length_state=length_state(support, self.plan.ignore_eos),
        )
        ctx.rundir.update_manifest(length_mode=mode)
        with Progress(self.total(), "bench", "requests") as bar:
            async with sample_gpu_memory(ctx.rundir, ctx.clock):
                await run_bench(ctx.client, ctx.rundir, plan, bar.update, mark=ctx.evidence.snapshot)
        await ctx.evidence.end()
        lines = ctx.rundir.read(REQUESTS)
        summary = summarize(lines, plan)
        with_server_metrics(summary, ctx.rundir.read(METRICS_FILE), lines)
        summary = {
            **summary,
            **evidence_summary(ctx.rundir.path),
            "gpu_memory": summarize_gpu(ctx.rundir.read(GPU_FILE)),
            "client": client_lag(lines),
        }
        code = 1 if summary["errors"] else 0
        return Measured(
            written_record(summary),
            code,
            complete=not summary["errors"],
            failure=failed_line(lines),
        )


def failed_line(lines: list[dict[str, Any]]) -> str | None:
    """The exit-1 line when measurements are left failed (`left_failed`, as the summary's `errors` counts them);
    the session scrubs it of the run's secrets."""
    measured = [x for x in lines if x.get("bench_key")]
    left = left_failed(measured)
    keys = {(x["bench_key"], x.get("stream", 0)) for x in measured}
    return failure_line("bench", count_failures((x.get("error") for x in left), len(keys)))


def with_server_metrics(summary: dict[str, Any], scrapes: list[dict[str, Any]], lines: list[dict[str, Any]]) -> None:
    """Where the server sent no `timings`, its decode rate per prompt and its streams' combined rate from its
    /metrics windows (vLLM's counters); and its prefix-cache counters over the run."""
    summary["prefix_cache"] = hit_rate(scrapes)
    for name, p in summary["prompts"].items():
        if p.get("server_tok_s") is None and (rate := decode_rate(scrapes, name)) is not None:
            p["server_tok_s"], p["server_source"] = rate, SOURCE
            p["vs_server"] = p["tok_s"] / rate - 1 if p.get("tok_s") else None
    conc = summary.get("concurrent")
    if conc and conc.get("server_combined_tok_s") is None:
        done = measurements(lines)[0]
        full = [g for k, g in done.items() if k.startswith("concurrent:") and len(g) == conc.get("streams")]
        if (rate := combined_decode_rate(scrapes, full)) is not None:
            conc["server_combined_tok_s"], conc["server_source"] = rate, COMBINED_SOURCE
            conc["vs_server"] = conc["combined_tok_s"] / rate - 1 if conc.get("combined_tok_s") else None
