"""`summary.json` of a stress run, computed from its files alone (so it can be recomputed from an old run).

Only completed cycles are counted, each from the lines of the attempt that completed it (stress/resume.py): a
resumed run reports what an uninterrupted one would. A partial run's cut cycle is reported apart, under
`unfinished_cycle`; lines of cut attempts that a later attempt re-ran are counted under `ignored_lines`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict, cast

from evalkit.evidence.gpu_memory import GPU_FILE, done_times, leak_verdict, summarize_gpu
from evalkit.evidence.request_lines import RequestLineJson
from evalkit.evidence.server_evidence import read_evidence
from evalkit.runs.rundir import MANIFEST, Line, read_json_object, read_jsonl
from evalkit.runs.schemas import LongPromptTokens, StressSummary
from evalkit.stats import distribution
from evalkit_stress.client_distortion import client_health
from evalkit_stress.diagnose import diagnose
from evalkit_stress.exercised import annotate, exercised
from evalkit_stress.exercised import summary as exercised_summary
from evalkit_stress.metrics import compute_metrics
from evalkit_stress.resume import attempt_of, in_counted_cycle, read_counted
from evalkit_stress.runner import LAG_FILE, PROMPTS_FILE


class RequestBrief(TypedDict):
    """A request named in the summary: which one, of which cycle, scenario and role."""

    request_id: str
    cycle: int | None
    scenario: str | None
    role: str | None


class ErrorRequest(RequestBrief):
    """summary.json's `error_requests` entry: a request that failed, and how."""

    kind: str
    error: str | None
    http_status: int | None


class WrongRequest(RequestBrief):
    """summary.json's `wrong_answer_requests` entry: the answer expected and the one read from the reply."""

    expected: str | None
    extracted: str | None


class DivergentRequest(RequestBrief):
    """summary.json's `divergent_requests` entry: a concurrent generation and the same prompt's run alone."""

    alone_request_id: str


def _brief(r: Line) -> RequestBrief:
    return {
        "request_id": r["request_id"],
        "cycle": r.get("cycle"),
        "scenario": r.get("scenario"),
        "role": r.get("role"),
    }


def divergent_generations(lines: list[Line]) -> list[DivergentRequest]:
    """Concurrent generations whose text differs from the same prompt run alone (temperature 0)."""
    solos = {(r["cycle"], r["expected"]): r for r in lines if r.get("role") == "gen_solo" and r.get("status") == "ok"}
    out: list[DivergentRequest] = []
    for r in lines:
        if r.get("role") != "gen_pair" or r.get("status") != "ok":
            continue
        solo = solos.get((r["cycle"], r["expected"]))
        if solo is not None and solo.get("content") != r.get("content"):
            out.append({**_brief(r), "alone_request_id": solo["request_id"]})
    return out


def failed_by_metric(lines: list[Line]) -> dict[str, int]:
    """Per metric, the requests that failed (a metric with no sample then says why it has none)."""
    out: dict[str, int] = {}
    for r in lines:
        if r.get("outcome") == "error" and r.get("metric"):
            out[r["metric"]] = out.get(r["metric"], 0) + 1
    return out


def _unfinished(lines: list[Line]) -> dict[str, int] | None:
    if not lines:
        return None
    return {
        "cycle": min(int(r["cycle"]) for r in lines),
        "attempt": lines[0].get("attempt", 0),
        "requests": len(lines),
        "errors": sum(r.get("outcome") == "error" for r in lines),
        "wrong_answers": sum(r.get("outcome") == "wrong" for r in lines),
    }


def build_summary(
    run_path: Path, seed: int, cycles_planned: int, options: dict[str, Any], stopped: str | None
) -> StressSummary:
    """The contract's stress summary plus diagnoses, error and wrong-answer lists, client health, GPU memory."""
    manifest = read_json_object(run_path / MANIFEST)
    split, completed = read_counted(run_path)
    stress_lines = split.counted
    lines = split.calibration + stress_lines
    # Metrics only from requests whose planned situation happened (stress/exercised.py); the others are counted.
    metrics = compute_metrics(exercised(stress_lines))
    errors: list[ErrorRequest] = [
        # a failed line names its kind (runner.py); `error_kinds`, keyed by it, could hold no other key
        {
            **_brief(r),
            "kind": cast(str, r.get("error_kind")),
            "error": r.get("error"),
            "http_status": r.get("http_status"),
        }
        for r in lines
        if r.get("outcome") == "error"
    ]
    wrong: list[WrongRequest] = [
        {**_brief(r), "expected": r.get("expected"), "extracted": r.get("extracted")}
        for r in stress_lines
        if r.get("outcome") == "wrong"
    ]
    kinds: dict[str, int] = {}
    for e in errors:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    # One fitting per long prompt, even if a resume re-read it (first line wins, as when it was reloaded).
    prompts = list(
        {(p.get("first_word"), p.get("code")): p for p in reversed(read_jsonl(run_path / PROMPTS_FILE))}.values()
    )
    target = options.get("long_tokens")
    reported = [r["prompt_tokens"] for r in stress_lines if r.get("role") == "long" and r.get("prompt_tokens")]
    divergent = divergent_generations(stress_lines)
    gpu = summarize_gpu(
        [s for s in read_jsonl(run_path / GPU_FILE) if int(s.get("cycle") or 0) == 0 or in_counted_cycle(s, completed)],
        done_times(cast(list[RequestLineJson], lines)),
    )
    return StressSummary(
        seed=seed,
        cycles=len(completed),
        cycles_planned=cycles_planned,
        partial=stopped not in (None, "completed", "decided"),
        stopped=stopped or "completed",
        requests=len(stress_lines),
        errors=len(errors),
        wrong_answers=len(wrong),
        divergent=len(divergent),
        attempts=attempt_of(manifest) + 1,
        cycle_attempts={str(c): a for c, a in sorted(completed.items())},
        unfinished_cycle=_unfinished(split.unfinished),
        ignored_lines={"abandoned_attempts": split.abandoned},
        metrics=metrics,
        diagnoses=dict(diagnose(metrics, annotate(stress_lines), read_evidence(run_path)).to_json()),  # the open block
        not_exercised=exercised_summary(stress_lines),
        failed_by_metric=failed_by_metric(stress_lines),
        error_kinds=kinds,
        error_requests=errors,
        wrong_answer_requests=wrong,
        divergent_requests=divergent,
        long_prompt_tokens=LongPromptTokens(
            target=target,
            counted=distribution(p["counted_tokens"] for p in prompts),
            reported_by_server=distribution(reported),
            max_error_vs_target=(max(abs(v - target) / target for v in reported) if reported and target else None),
        ),
        client=dict(  # a plain dict for the summary's open `client` block
            client_health(
                stress_lines, [r for r in read_jsonl(run_path / LAG_FILE) if in_counted_cycle(r, completed)], metrics
            )
        ),
        gpu_memory=gpu,
        gpu_memory_verdict=dict(leak) if (leak := leak_verdict(gpu)) is not None else None,
        options=options,
    )
