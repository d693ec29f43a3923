"""A capability run under a background load: the graded questions at idle and again while the load runs.

The idle pass (`graded-idle.jsonl`, or `--idle-run DIR`'s `graded.jsonl`) comes first, with nothing else at the
server; then the background load starts (evalkit/load/background.py; its requests in `background.jsonl`), runs
`warmup_s`, and the same questions are asked again under it (`graded.jsonl`, the run's scores). The comparison pairs
the two per question: right→wrong and wrong→right flips, McNemar's exact test on them (the capability report's
marks, evalkit/report/capability.py), and the share of answers whose text changed at all. `no_worse_beyond_noise`
is what a gate rule holds (`capability.under_load.no_worse_beyond_noise == 1`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypedDict

from evalkit.load.background import BACKGROUND, BackgroundLoad, Overlap, overlap
from evalkit.load.load_spec import LoadSpec
from evalkit.report import noise
from evalkit.report.capability import paired_verdict
from evalkit.runs.rundir import RunDir, read_jsonl
from evalkit.session.context import RunContext
from evalkit_evals.measure import OnePass, UnderLoad
from evalkit_evals.question_scores import graded_lines, latest_per_sample, question_scores

IDLE = "graded-idle.jsonl"


class Tally(TypedDict):
    """Correct out of the questions both passes graded."""

    correct: float
    total: int


class Mark(TypedDict):
    """McNemar's mark between the passes and the figures behind it."""

    mark: str
    detail: str


class Comparison(TypedDict):
    """The two passes per question (`compare`)."""

    paired: int
    idle: Tally
    loaded: Tally
    lost: list[str]
    gained: list[str]
    mcnemar: Mark
    worse_beyond_noise: bool
    no_worse_beyond_noise: bool
    changed_text: int
    changed_text_share: float | None


class BackgroundTally(Overlap):
    """The background's requests by outcome, and how busy it kept the server beside the loaded pass."""

    requests: int
    errors: int
    wrong_answers: int
    cancelled_at_stop: int


class UnderLoadJson(Comparison):
    """summary.json's `under_load`, in the order written: the load, where the idle pass came from, the comparison,
    the background."""

    load: dict[
        str, str | int | float | None
    ]  # the load spec as given (evalkit.load.load_spec.LoadSpec.to_json), nulls left out
    idle_source: str
    background: BackgroundTally


RunPass = Callable[[str, dict[str, str]], Awaitable[None]]  # (graded file, request tags) -> the pass asked


def under_load_passes(spec: LoadSpec, idle_run: Path | None) -> UnderLoad:
    """The idle and loaded passes of a capability run under `spec`'s background load (`run_passes`), as the run
    calls them: with its context, one pass and the ids of the questions asked."""

    async def passes(ctx: RunContext, one_pass: OnePass, wanted: set[str]) -> UnderLoadJson:
        return await run_passes(
            ctx.rundir,
            spec,
            idle_run,
            one_pass,
            lambda write: BackgroundLoad(ctx.client, ctx.clock, spec, write),
            wanted,
        )

    return passes


async def run_passes(
    rundir: RunDir,
    spec: LoadSpec,
    idle_run: Path | None,
    run_pass: RunPass,
    make_load: Callable[[Callable[[dict[str, Any]], None]], BackgroundLoad],
    wanted: set[str],
) -> UnderLoadJson:
    """The idle pass (unless `idle_run`), the loaded pass under the background load; returns `under_load`."""
    if idle_run is None:
        await run_pass(IDLE, {"pass": "idle"})
        idle = [ln for ln in rundir.read(IDLE) if ln["id"] in wanted]
        idle_source = IDLE
    else:
        idle = [ln for ln in read_jsonl(idle_run / "graded.jsonl") if ln.get("id") in wanted]
        idle_source = str(idle_run)
    async with make_load(lambda line: rundir.append(BACKGROUND, line)):
        await run_pass("graded.jsonl", {"pass": "loaded"})
    loaded = [ln for ln in rundir.read("graded.jsonl") if ln["id"] in wanted]
    loaded_ids = {ln.get("request_id") for ln in loaded}
    fg = [r for r in rundir.read("requests.jsonl") if r.get("request_id") in loaded_ids]
    return {
        "load": {k: v for k, v in spec.to_json().items() if v is not None},
        "idle_source": idle_source,
        **compare(idle, loaded),
        "background": _background(rundir.read(BACKGROUND), fg),
    }


def _background(lines: list[dict[str, Any]], fg: list[dict[str, Any]]) -> BackgroundTally:
    return {
        "requests": len(lines),
        "errors": sum(1 for r in lines if r.get("outcome") == "error"),
        "wrong_answers": sum(1 for r in lines if r.get("outcome") == "wrong"),
        "cancelled_at_stop": sum(1 for r in lines if r.get("outcome") == "cancelled_as_planned"),
        **overlap(lines, fg),
    }


def compare(idle: list[dict[str, Any]], loaded: list[dict[str, Any]]) -> Comparison:
    """Scores, flips, McNemar and the changed-text share of the questions both passes graded."""
    a, b = question_scores(graded_lines(idle)), question_scores(graded_lines(loaded))
    common = [q for q in a if q in b]
    verdict = paired_verdict({q: a[q] for q in common}, {q: b[q] for q in common})
    lost = sorted(q for q in common if b[q].score < a[q].score)
    gained = sorted(q for q in common if b[q].score > a[q].score)
    text_a = {(x["id"], int(x.get("repeat") or 0)): x.get("content") for x in latest_per_sample(idle)}
    text_b = {(x["id"], int(x.get("repeat") or 0)): x.get("content") for x in latest_per_sample(loaded)}
    pairs = [k for k in text_a if k in text_b and k[0] in common]
    changed = sum(1 for k in pairs if (text_a[k] or "").strip() != (text_b[k] or "").strip())
    return {
        "paired": len(common),
        "idle": {"correct": round(sum(a[q].score for q in common), 6), "total": len(common)},
        "loaded": {"correct": round(sum(b[q].score for q in common), 6), "total": len(common)},
        "lost": lost,
        "gained": gained,
        "mcnemar": {"mark": verdict.mark, "detail": verdict.detail},
        "worse_beyond_noise": verdict.mark == noise.WORSE,
        "no_worse_beyond_noise": verdict.mark != noise.WORSE,
        "changed_text": changed,
        "changed_text_share": changed / len(pairs) if pairs else None,
    }
