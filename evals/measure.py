"""`evalkit capability` as one measurement of a run session: the chosen questions asked live, graded as they come,
summarized into the scoreboard with what the server said about itself; its exit code and the line naming the
questions left graded `error`.

`CapabilityMeasurement` is the live run (`evalkit.session.measurement.run_measurement` opens and closes it);
`score_run` is the summary and exit code both a live run and a replay end with.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evalkit.client.lag import client_lag
from evalkit.config.profiles import thinking_params
from evalkit.evidence.capture import evidence_summary
from evalkit.evidence.gpu_memory import GPU_FILE, sample_gpu_memory, summarize_gpu
from evalkit.redact import known_forms
from evalkit.runs.failures import count_failures, failure_line
from evalkit.runs.schemas import GradedLine, written_record
from evalkit.session.context import RunContext
from evalkit.session.measurement import Measured
from evalkit_evals.datasets import DatasetItem
from evalkit_evals.question_scores import Graded, graded_lines
from evalkit_evals.repeats_auto import FILE as REPEATS_FILE
from evalkit_evals.repeats_auto import RepeatsAutoJson, RepeatsDecision, RepeatsRule, decide_repeats, decision_line
from evalkit_evals.runner import Sampling, run_live
from evalkit_evals.scoreboard import latest_per_id, summarize, thinking_warning

GRADED = "graded.jsonl"
OnePass = Callable[[str, "dict[str, str] | None"], Awaitable[None]]  # (graded file, request tags) -> pass asked
# The passes of a run under a background load (evalkit.under_load): given the run and one pass, it asks
# the idle and the loaded pass of the questions asked (their ids) and returns summary.json's `under_load`.
UnderLoad = Callable[[RunContext, OnePass, set[str]], Awaitable[Mapping[str, object]]]  # read by no one here


@dataclass(frozen=True)
class CapabilityMeasurement:
    """One live capability run: `items` asked at `thinking` with `sampling`, graded by `code_judge` (HumanEval+'s
    sandbox, or None) and the rules, with a model `judge_settings` where one is given."""

    items: tuple[DatasetItem, ...]
    thinking: str
    max_tokens: int
    sampling: Sampling
    revisions: dict[str, str]  # dataset -> its short revision, recorded on each graded line
    manifest: dict[str, Any]
    options: dict[str, Any]
    scope: dict[str, Any] | None
    question_set: tuple[str, str]  # (name, sha256)
    data_dir: str | None = None
    concurrency: int | None = None  # None: the profile's, else 1
    code_judge: Any = None
    judge_settings: Any = None
    under_load: UnderLoad | None = None
    kind: str = "capability"
    repeats_auto: RepeatsRule | None = None  # `--repeats auto`: rounds until each dataset's pass@1 is sure

    async def measure(self, ctx: RunContext) -> Measured:
        from evalkit_evals.grader import Grader

        concurrency = self.concurrency or ctx.profile.concurrency or 1
        settings = self.judge_settings
        if settings is not None and settings.api_key:
            ctx.rundir.secrets += known_forms((settings.api_key,))
        judge = await open_judge(settings, concurrency)
        body, system_prompt = thinking_params(ctx.profile, self.thinking)
        # What a request adds (thinking) over the client's standing body; the manifest records the two together.
        request_body = {**ctx.client.standing_body, **body}
        ctx.rundir.update_manifest(
            concurrency=concurrency, request_extra_body=request_body, system_prompt=system_prompt
        )
        grader = Grader(self.data_dir, self.code_judge)
        wanted = {it.qid for it in self.items}
        under: Mapping[str, object] = {}
        auto: RepeatsAutoJson | None = None

        async def one_pass(
            graded: str = GRADED, tags: dict[str, str] | None = None, sampling: Sampling | None = None
        ) -> None:
            await run_live(
                ctx.rundir,
                ctx.client,
                list(self.items),
                grader,
                self.revisions,
                body,
                system_prompt,
                self.max_tokens,
                concurrency,
                sampling or self.sampling,
                graded=graded,
                pass_tags=tags,
                judge=judge,
            )

        try:
            async with sample_gpu_memory(ctx.rundir, ctx.clock):
                if self.repeats_auto is not None:
                    auto = await self._rounds(ctx, one_pass, wanted)
                elif self.under_load is None:
                    await one_pass()
                else:
                    under = await self.under_load(ctx, one_pass, wanted)
        finally:
            grader.close()
            if judge is not None:
                await judge.aclose()
        lines = [ln for ln in ctx.rundir.read(GRADED) if ln["id"] in wanted]
        await ctx.evidence.end()
        name, sha256 = self.question_set
        extra = {
            "mode": "live",
            "question_set": name,
            "question_set_sha256": sha256,
            **evidence_summary(ctx.rundir.path),
            "gpu_memory": summarize_gpu(ctx.rundir.read(GPU_FILE)),
            "client": client_lag(ctx.rundir.read("requests.jsonl")),
            **({"under_load": under} if under else {}),
            **({"repeats_auto": auto} if auto else {}),
        }
        got = score_run(lines, self.thinking, extra)
        if auto and not auto["decided"]:
            # Ended undecided: exit 1 and a last line that says so, not a table that reads like an answer (#58).
            got = replace(got, exit_code=1, failure=got.failure or undecided_line(auto))
        return got

    async def _rounds(
        self, ctx: RunContext, one_pass: Callable[..., Awaitable[None]], wanted: set[str]
    ) -> RepeatsAutoJson:
        """`--repeats auto`: one more round of every question until each dataset's pass@1 is sure (a round a
        resumed run already has is not asked again); the last decision, for the summary."""
        assert self.repeats_auto is not None
        rule = self.repeats_auto
        baseline = rule.baseline_scores()
        d: RepeatsDecision = {"repeats": 0, "decided": False, "undecided": [], "datasets": {}}
        for rounds in range(1, rule.max_repeats + 1):
            await one_pass(GRADED, None, replace(self.sampling, repeats=rounds))
            d = decide_repeats([ln for ln in ctx.rundir.read(GRADED) if ln["id"] in wanted], rule, rounds, baseline)
            ctx.rundir.append(REPEATS_FILE, dict(d))
            print(decision_line(d, rule), file=sys.stderr, flush=True)
            if d["decided"]:
                break
        auto: RepeatsAutoJson = {**rule.to_json(), **d}  # the rule's keys, then the round's
        return auto


def undecided_line(auto: RepeatsAutoJson) -> str:
    """The exit-1 line of a `--repeats auto` run that ran its rounds and is still undecided."""
    most = auto["max_repeats"]
    return (
        f"capability: --repeats auto ended undecided after {auto['repeats']} of at most {most} rounds: "
        f"{', '.join(auto['undecided'])} not sure within ±{auto['margin']} (see the last "
        "'repeats auto:' line); the scores above are not decided: raise --max-repeats or --margin"
    )


async def open_judge(settings: Any, concurrency: int) -> Any:
    """The judge, checked reachable before any grading (exit 2 in one line when it is not); None without one."""
    if settings is None:
        return None
    from evalkit_evals.model_judge import ModelJudge

    return await ModelJudge.connect(settings, concurrency)


def score_run(
    lines: Sequence[Graded],
    thinking: str | None,
    extra: dict[str, Any],
    per_line: bool = False,
) -> Measured:
    """The scoreboard of the graded lines, the exit code and the failure line. `per_line` (replay): every line is
    its own case; otherwise the last line of each id and repeat counts (a resumed live run re-asks errored
    questions). A replay cannot do better by running again: complete either way."""
    latest = graded_lines(lines if per_line else latest_per_id(lines))
    warning = thinking_warning(latest, thinking)
    truncated = sum(1 for ln in latest if ln.finish_reason == "length")
    summary = summarize(
        latest,
        thinking,
        truncated_answers=truncated,
        thinking_warning=warning,
        thinking_seen=sum(1 for ln in latest if ln.thinking),
        **extra,
    )
    replay = extra.get("mode") == "replay"
    failed = failed_line(latest, replay)
    return Measured(written_record(summary), 1 if failed else 0, complete=failed is None or replay, failure=failed)


def failed_line(latest: Sequence[GradedLine], replay: bool) -> str | None:
    """The exit-1 line when questions are left graded `error` (their latest line: a resume re-asked the rest)."""
    then = (
        "the replay cannot retry them: fix the answers file and grade it under another --name or with --fresh"
        if replay
        else "run the same command again to ask them again"
    )
    errors = (ln.why for ln in latest if ln.outcome == "error")
    return failure_line("capability", count_failures(errors, len(latest)), what="questions", then=then)
