"""`evalkit stress` as one measurement of a run session: the seeded schedule sent cycle by cycle, resumed where a
run stopped, summarized with the server's own evidence; its exit code and the line naming what failed.

Resuming (which cycles are done, the prompts and token counter reloaded) is `evalkit_stress.resume`; sending is
`evalkit_stress.runner.StressRunner`; the summary is `evalkit_stress.summary.build_summary`.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass, field, replace
from typing import Any, cast

from evalkit.client.field_support import length_fields, length_forced_flag, length_state
from evalkit.client.stream_killing import KILL_ROW, kill_check
from evalkit.client.tokenize import TokenCounter
from evalkit.evidence.capture import evidence_summary
from evalkit.evidence.gpu_memory import nvidia_smi
from evalkit.evidence.prefix_cache_counters import hit_rate
from evalkit.evidence.server_metrics import METRICS_FILE
from evalkit.runs.failures import count_failures, error_words, failure_line
from evalkit.runs.json_value import JsonValue
from evalkit.runs.rundir import Line
from evalkit.runs.schemas import written_record
from evalkit.session.context import RunContext
from evalkit.session.measurement import Measured
from evalkit_stress.plan import StressPlan, StressSettings
from evalkit_stress.resume import CYCLES_FILE, SCHEDULE_OPTIONS, attempt_of, completed_cycles, load_fitted
from evalkit_stress.runner import PROMPTS_FILE, StressRunner
from evalkit_stress.scenario_results import SCENARIO_COPY, scenario_summary
from evalkit_stress.schedule import Schedule
from evalkit_stress.summary import build_summary
from evalkit_stress.until_sure import FILE as UNTIL_SURE_FILE
from evalkit_stress.until_sure import counted_lines, decide_run


@dataclass(frozen=True)
class StressMeasurement:
    """One stress run of `plan`: its seeded schedule, the settings the manifest records (`stress`) and a resume
    must match, and how it is sent, all read off the plan once; a baseline's counted request lines are read here."""

    plan: StressPlan
    kind: str = "stress"
    scope: dict[str, JsonValue] | None = None
    schedule: Schedule = field(init=False)
    settings: StressSettings = field(init=False)
    baseline: list[Line] | None = field(init=False)

    def __post_init__(self) -> None:
        plan = self.plan
        object.__setattr__(self, "schedule", plan.schedule())
        object.__setattr__(self, "settings", plan.settings())
        lines = counted_lines(plan.baseline)[0] if plan.baseline is not None else None
        object.__setattr__(self, "baseline", lines)

    @property
    def manifest(self) -> dict[str, JsonValue]:
        return {"seed": self.plan.seed, "cycles": self.plan.cycles, "stress": cast(JsonValue, self.settings)}

    @property
    def options(self) -> dict[str, JsonValue]:
        s, plan = self.settings, self.plan
        return {
            "--seed": plan.seed,
            "--cycles": plan.cycles,
            **{"--" + k.replace("_", "-"): s[k] for k in SCHEDULE_OPTIONS if k in s},  # type: ignore[literal-required]
            "--scenario": {"file": s["scenario_file"], "sha256": s["scenario_sha256"]},
            **({"--until-sure": cast(JsonValue, plan.until_sure.to_json())} if plan.until_sure is not None else {}),
            **({"--baseline": str(plan.baseline)} if plan.baseline is not None else {}),
        }

    def decide(self, ctx: RunContext) -> bool:
        """`--until-sure`: the decision the run's files support now, recorded in until_sure.jsonl and said in one
        line on standard error; True when the run may stop."""
        if self.plan.until_sure is None:
            return False
        d = decide_run(ctx.rundir.path, self.plan.until_sure, self.baseline, baseline_path=self.plan.baseline)
        ctx.rundir.append(UNTIL_SURE_FILE, {**d.to_json(), "attempt": attempt_of(ctx.rundir.manifest)})
        print(d.line(), file=sys.stderr, flush=True)
        return d.decided

    async def measure(self, ctx: RunContext) -> Measured:
        rd = ctx.rundir
        manifest = rd.manifest
        attempt = attempt_of(manifest)
        completed = completed_cycles(rd.read(CYCLES_FILE)) if rd.resumed else {}
        if not (rd.path / SCENARIO_COPY).exists():
            # The run keeps its scenario file, so its summary can be recomputed from the directory alone.
            (rd.path / SCENARIO_COPY).write_text(self.plan.source.text, encoding="utf-8")
        fitted = load_fitted(rd.read(PROMPTS_FILE), self.schedule) if rd.resumed else {}
        counter = (
            TokenCounter.from_description(manifest["tokenization"], ctx.client.base_url, ctx.client.model)
            if rd.resumed and manifest.get("tokenization")
            else None
        )
        if rd.resumed:
            print(
                f"resuming {rd.path} (attempt {attempt}): {len(completed)}/{self.plan.cycles} cycles already done, "
                f"{len(fitted)} long prompts reloaded",
                file=sys.stderr,
                flush=True,
            )
        stop = asyncio.Event()
        reason: dict[str, str] = {}
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            # First Ctrl-C: stop cleanly and keep everything; a second one falls back to the default.
            reason.setdefault("stopped", "interrupted")
            stop.set()
            loop.remove_signal_handler(signal.SIGINT)

        loop.add_signal_handler(signal.SIGINT, on_sigint)
        timer = None
        if self.plan.max_minutes:

            def on_time() -> None:
                reason.setdefault("stopped", "max_minutes")
                stop.set()

            timer = loop.call_later(self.plan.max_minutes * 60, on_time)
        kill = await kill_check(
            ctx.client.base_url,
            ctx.client.model,
            ctx.profile.api_key,
            dict(ctx.profile.extra_body),
            ctx.client.uuid_request_ids,
            preflight=ctx.client.preflight,
        )
        # The check's own requests (two generations, not in requests.jsonl) stay out of the run's server counters:
        # the `before` scrape is taken again after them (vLLM: 88 prompt tokens more than the run sent; issue 57).
        await ctx.evidence.snapshot("before")
        killing = {"kills": kill.supported, "detail": kill.detail}
        send = self.plan.send()
        gen_tokens = send.gen_tokens
        support = getattr(ctx.client.preflight, "fields", None)
        forced, mode = length_fields(support, gen_tokens, self.plan.ignore_eos)
        state = length_state(support, self.plan.ignore_eos)
        rd.update_manifest(
            generation_length={
                "mode": mode,
                "state": state,
                "fields": sorted(forced),
                "ignore_eos_flag": self.plan.ignore_eos,
            }
        )
        rd.update_manifest(stream_killing=killing)
        if kill.supported:
            print(f"note: {KILL_ROW}: {kill.detail}", file=sys.stderr, flush=True)
        opts = replace(
            send,
            kills_streams=bool(kill.supported),
            length_body=forced,
            length_mode=mode,
            length_forced=length_forced_flag(state),
        )
        exe = nvidia_smi()
        runner = StressRunner(
            rd,
            ctx.client,
            ctx.clock,
            self.schedule,
            opts,
            stop,
            gpu_exe=exe,
            attempt=attempt,
            completed=completed,
            fitted=fitted,
            counter=counter,
            on_scenario_end=lambda name: ctx.evidence.snapshot(f"scenario:{name}"),
            after_cycle=(lambda _cycle: asyncio.to_thread(self.decide, ctx)) if self.plan.until_sure else None,
        )
        rd.update_manifest(gpu_memory_sampler=exe)
        # A resumed --until-sure run whose completed cycles already decided it (stopped before its summary) sends
        # nothing more.
        decided_before = bool(completed) and self.plan.until_sure is not None and self.decide(ctx)
        try:
            if not decided_before:
                await runner.run()
        finally:
            if timer is not None:
                timer.cancel()
            try:
                loop.remove_signal_handler(signal.SIGINT)
            except (ValueError, RuntimeError):
                pass
        stopped = reason.get("stopped", "decided" if runner.decided or decided_before else "completed")
        await ctx.evidence.end()
        summary = {
            **build_summary(rd.path, self.plan.seed, self.plan.cycles, dict(self.settings), stopped).to_json(),
            **evidence_summary(rd.path),
            **scenario_summary(rd.path),
            "stream_killing": killing,
            # The server's own prefix-cache counters over the run (a warm server serves prompts from its cache).
            "prefix_cache": hit_rate(rd.read(METRICS_FILE)),
        }
        rule = self.plan.until_sure
        if rule is not None:
            final = decide_run(rd.path, rule, self.baseline, baseline_path=self.plan.baseline)
            summary["until_sure"] = {
                **rule.to_json(),
                **({"baseline": str(self.plan.baseline)} if self.plan.baseline is not None else {}),
                "stopped_early": stopped == "decided",
                **final.to_json(),
            }
        code, failed = exit_code(summary, stopped)
        # Errors in completed cycles are the server's answers under stress: a resume re-runs only cut cycles.
        done = stopped in ("completed", "decided")
        return Measured(written_record(summary), code, complete=done, stopped=stopped, failure=failed)


def exit_code(summary: dict[str, Any], stopped: str) -> tuple[int, str | None]:
    """The run's exit code, and the line saying how many requests failed (None when none did)."""
    if stopped == "interrupted":
        return 130, None
    failed = failure_line(
        "stress",
        count_failures(
            (
                error_words(e.get("error"), e.get("kind"))
                for e in summary["error_requests"]
                if e.get("scenario") != "calibration"
            ),
            summary["requests"],
        ),
        then="listed in summary.json error_requests (a resume re-runs only cycles cut short)",
    )
    if failed is not None:
        return 1, failed
    # Contract: 1 = a check failed. A partial run's expectations are still shown but only judged when complete.
    return (1 if summary.get("expectations_failed") and stopped in ("completed", "decided") else 0), None
