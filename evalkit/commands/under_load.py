"""`evalkit capability --under-load LOAD`: the graded questions at idle and again while a background load runs.

The idle pass (`graded-idle.jsonl`, or `--idle-run DIR`'s `graded.jsonl`) comes first, with nothing else at the
server; then the background load starts (evalkit/load/background.py; its requests in `background.jsonl`), runs
`warmup_s`, and the same questions are asked again under it (`graded.jsonl`, the run's scores). The comparison pairs
the two per question: right→wrong and wrong→right flips, McNemar's exact test on them (the capability report's
marks, evalkit/report/capability.py), and the share of answers whose text changed at all. `no_worse_beyond_noise`
is what a gate rule holds (`capability.under_load.no_worse_beyond_noise == 1`).
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from evalkit.errors import UsageError
from evalkit.load.background import BACKGROUND, BackgroundLoad, overlap
from evalkit.load.load_spec import LoadSpec, parse_load_spec
from evalkit.report import noise
from evalkit.report.capability import paired_verdict
from evalkit.runs.rundir import RunDir, read_jsonl
from evalkit_evals.question_scores import graded_lines, latest_per_sample, question_scores

IDLE = "graded-idle.jsonl"
RunPass = Callable[[str, dict[str, Any]], Awaitable[None]]  # (graded file, request tags) -> the pass asked


def add_under_load_arguments(g: argparse._ArgumentGroup) -> None:
    """`--under-load LOAD` and `--idle-run DIR`."""
    g.add_argument(
        "--under-load",
        metavar="LOAD",
        help="ask the questions at idle and again under a background load: 'concurrency=4', "
        "'rate=2,arrivals=poisson,prompt_tokens=512' or a TOML file of those keys (docs/datasets.md)",
    )
    g.add_argument(
        "--idle-run",
        type=Path,
        metavar="DIR",
        help="with --under-load: take the idle answers from this earlier capability run instead of an idle pass",
    )


def check_under_load(args: argparse.Namespace) -> LoadSpec | None:
    """The parsed load (None without --under-load); --idle-run must be a capability run holding graded.jsonl."""
    if args.under_load is None:
        if args.idle_run is not None:
            raise UsageError("--idle-run goes with --under-load")
        return None
    if args.idle_run is not None and not (args.idle_run / "graded.jsonl").is_file():
        raise UsageError(f"--idle-run {args.idle_run}: no graded.jsonl there (a capability run directory)")
    return parse_load_spec(args.under_load)


async def run_passes(
    rundir: RunDir,
    spec: LoadSpec,
    idle_run: Path | None,
    run_pass: RunPass,
    make_load: Callable[[Callable[[dict[str, Any]], None]], BackgroundLoad],
    wanted: set[str],
) -> dict[str, Any]:
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


def _background(lines: list[dict[str, Any]], fg: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "requests": len(lines),
        "errors": sum(1 for r in lines if r.get("outcome") == "error"),
        "wrong_answers": sum(1 for r in lines if r.get("outcome") == "wrong"),
        "cancelled_at_stop": sum(1 for r in lines if r.get("outcome") == "cancelled_as_planned"),
        **overlap(lines, fg),
    }


def compare(idle: list[dict[str, Any]], loaded: list[dict[str, Any]]) -> dict[str, Any]:
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


def describe(u: dict[str, Any]) -> str:
    """One line for the terminal."""
    bg = u["background"]
    mif = bg.get("mean_in_flight")
    share = u.get("changed_text_share")
    verdict = "beyond noise, worse" if u["worse_beyond_noise"] else "within noise or better"
    return (
        f"under load ({u['load'].get('source') or '?'}): {u['loaded']['correct']:g}/{u['loaded']['total']} against "
        f"{u['idle']['correct']:g}/{u['idle']['total']} idle; {len(u['lost'])} lost, {len(u['gained'])} gained "
        f"({u['mcnemar']['detail']}) {u['mcnemar']['mark']} {verdict}; "
        f"{'-' if share is None else f'{share:.0%}'} of answers changed text; background "
        f"{bg['requests']} requests, {'-' if mif is None else f'{mif:.2f}'} in flight on average"
    )
