"""`evalkit capability`: the pinned 140-question set against a server, or `--replay` of recorded answers."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
from pathlib import Path
from typing import Any

from evalkit.cli import add_output_options, add_server_options
from evalkit.client.lag import client_lag
from evalkit.config.argtypes import nonneg_float, positive_int
from evalkit.config.profiles import THINKING_MODES, thinking_params
from evalkit.errors import UsageError
from evalkit.evidence.capture import evidence_summary
from evalkit.evidence.gpu_memory import GPU_FILE, sample_gpu_memory, summarize_gpu
from evalkit.runs.context import open_run, print_run_path
from evalkit.runs.failures import count_failures, failure_line
from evalkit.runs.run_identity import run_defines
from evalkit.runs.rundir import RunDir, RunFinished, default_run_name

# Room for the answer alone, or for reasoning and the answer; a truncated answer is counted, never hidden.
DEFAULT_MAX_TOKENS = {"off": 4096, "low": 8192, "medium": 16384, "high": 32768}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit capability`."""
    add_server_options(p)
    add_output_options(p)
    g = p.add_argument_group("capability")
    g.add_argument(
        "--thinking",
        choices=THINKING_MODES,
        help="thinking mode asked of the server: required for a live run (not with --replay)",
    )
    g.add_argument(
        "--datasets", help="comma-separated subset of gsm8k,math500,musr,humanevalplus (default all; none with --eval)"
    )
    g.add_argument(
        "--eval",
        dest="evals",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a user eval file (TOML: dataset, Jinja prompt, extractor, scorer; see docs/datasets.md), "
        "asked whole; repeatable",
    )
    g.add_argument("--limit", type=positive_int, help="only the first N questions of each dataset in the manifest")
    g.add_argument(
        "--concurrency", type=positive_int, help="requests in flight (default: the server profile's, else 1)"
    )
    g.add_argument(
        "--data-dir",
        help="local dataset files in the Hub's columns (default $EVALKIT_DATA_DIR, else the Hugging Face Hub)",
    )
    g.add_argument(
        "--max-tokens",
        type=positive_int,
        help="per-request limit (default by mode: "
        + ", ".join(f"{k} {v}" for k, v in DEFAULT_MAX_TOKENS.items())
        + ")",
    )
    g.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        help="ask each question K times; pass@1 is the mean over repeats (default %(default)s)",
    )
    g.add_argument(
        "--temperature",
        type=nonneg_float,
        help="sampling temperature (default 0, or 0.7 with --repeats above 1; sampled repeats send seed 0..K-1)",
    )
    g.add_argument("--manifest", default="capability-140-v1", help="pinned question manifest (default %(default)s)")
    g.add_argument("--replay", type=Path, help="grade recorded answers from a JSONL file; no server needed")
    from evalkit.commands.under_load import add_under_load_arguments

    add_under_load_arguments(g)
    g.add_argument(
        "--unsafe-exec",
        action="store_true",
        help="run HumanEval+ code without bubblewrap, with resource "
        "limits only (recorded in the manifest); without it a missing bubblewrap is exit 2",
    )


def _user_evals(paths: list[Path]) -> tuple[list[str], dict[str, Any]]:
    """Register each `--eval FILE` for this run; their names, and what the manifest records of them."""
    from evalkit_evals import registry
    from evalkit_evals.user_eval import load_user_eval

    names, info = [], {}
    for path in paths:
        ev = load_user_eval(path)
        if ev.name in info:
            raise UsageError(f"two --eval files name the eval {ev.name!r} ({info[ev.name]['file']}, {path})")
        registry.register(ev)
        names.append(ev.name)
        info[ev.name] = {"file": str(path), "sha256": ev.sha256}
    return names, info


def _code_judge(datasets: list[str], unsafe_exec: bool) -> tuple[Any, dict[str, Any]]:
    """The sandbox for HumanEval+ (exit 2 when bubblewrap is missing, unless --unsafe-exec) and what the manifest
    records of it; (None, ...) when no model-written code will run."""
    from evalkit_evals import registry

    if not any(registry.get(ds).runs_code for ds in datasets):
        return None, {"tool": None, "note": "no HumanEval+ item: no model-written code runs"}
    from evalkit_evals.code_judge import CodeJudge
    from evalkit_evals.isolation import choose_isolation

    isolation = choose_isolation(unsafe_exec)
    if not isolation.isolated:
        sys.stderr.write("warning: --unsafe-exec: HumanEval+ code runs without bubblewrap, with resource limits only\n")
    return CodeJudge(isolation), isolation.manifest()


def _revisions(datasets: list[str], data_dir: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    from evalkit_evals.datasets import revision_info

    full = {ds: revision_info(ds, data_dir) for ds in datasets}
    short = {}
    for ds, info in full.items():
        parts = [v.get("revision") or f"local sha256:{(v.get('sha256') or 'missing')[:16]}" for v in info.values()]
        short[ds] = ",".join(dict.fromkeys(parts))
    return full, short


def _failed_line(latest: list[dict[str, Any]], secrets: list[str | None], replay: bool) -> str | None:
    """The exit-1 line when questions are left graded `error` (their latest line: a resume re-asked the rest)."""
    then = (
        "the replay cannot retry them: fix the answers file and grade it under another --name or with --fresh"
        if replay
        else "run the same command again to ask them again"
    )
    errors = (ln.get("why") for ln in latest if ln.get("outcome") == "error")
    return failure_line("capability", count_failures(errors, len(latest)), secrets, what="questions", then=then)


def _finish(
    rundir: RunDir,
    lines: list[dict[str, Any]],
    thinking: str | None,
    extra: dict[str, Any],
    secrets: list[str | None] = [],  # noqa: B006 - read, never changed
) -> int:
    from evalkit_evals.scoreboard import latest_per_id, summarize, thinking_warning

    latest = latest_per_id(lines)
    warning = thinking_warning(latest, thinking)
    truncated = sum(1 for ln in latest if ln.get("finish_reason") == "length")
    summary = summarize(
        latest,
        thinking,
        truncated_answers=truncated,
        thinking_warning=warning,
        thinking_seen=sum(1 for ln in latest if ln.get("thinking")),
        **extra,
    )
    rundir.write_summary(summary)
    failed = _failed_line(latest, secrets, extra.get("mode") == "replay")
    # A replay cannot do better by running again: complete either way.
    rundir.finish(exit_code=1 if failed else 0, complete=failed is None or extra.get("mode") == "replay")
    _print_summary(summary)
    print_run_path(rundir)
    if failed is not None:
        sys.stderr.write(failed + "\n")
        return 1
    return 0


def _print_summary(summary: dict[str, Any]) -> None:
    """The table and the lines under it, as a run prints them at its end (and again when started finished)."""
    from evalkit_evals.scoreboard import table

    truncated = summary.get("truncated_answers") or 0
    warning = summary.get("thinking_warning")
    print(table(summary))
    p1 = summary["total"].get("pass_at_1")
    if p1:
        print(
            f"pass@1 {p1['value']:.3f} (95% interval {p1['ci95'][0]:.3f} to {p1['ci95'][1]:.3f}) over "
            f"{p1['questions']} questions x {p1['repeats']} repeats; repeats agree on {p1['agreement']:.0%}"
        )
    if truncated:
        print(f"{truncated} answer(s) hit max_tokens (finish_reason length)")
    if summary.get("under_load"):
        from evalkit.commands.under_load import describe

        print(describe(summary["under_load"]))
    if warning:
        sys.stderr.write(f"warning: {warning}\n")
        print(f"warning: {warning}")
    note = (summary.get("client") or {}).get("note")
    if note:
        sys.stderr.write(f"warning: {note}\n")


def _replay(args: argparse.Namespace) -> int:
    from evalkit_evals.grader import Grader
    from evalkit_evals.prompting import template_hashes
    from evalkit_evals.question_set import items_by_id, load_manifest
    from evalkit_evals.runner import read_replay, run_replay

    answers = read_replay(args.replay)
    _, user = _user_evals(args.evals)
    qset = load_manifest(args.manifest)
    items = items_by_id([a["id"] for a in answers], args.data_dir)
    datasets = sorted({it.dataset for it in items.values()})
    judge, isolation = _code_judge(datasets, args.unsafe_exec)
    full, short = _revisions(datasets, args.data_dir)
    name = args.name or default_run_name("capability")
    manifest = {
        "mode": "replay",
        "replay_file": str(args.replay),
        "question_set": {"name": qset.name, "sha256": qset.sha256},
        "dataset_revisions": full,
        "seed": qset.raw.get("seed"),
        "thinking": None,
        "prompt_templates": template_hashes(datasets),
        "code_isolation": isolation,
        **({"user_evals": user} if user else {}),
    }
    options = {
        "--replay": {"file": str(args.replay), "sha256": _sha256(args.replay)},
        "--manifest": {"name": qset.name, "sha256": qset.sha256},
        "--eval": user,
        **{f"{ds} revision": rev for ds, rev in short.items()},
    }
    try:
        rundir = RunDir.create(
            args.out, name, "capability", manifest, defines=run_defines(None, None, None, options), fresh=args.fresh
        )
    except RunFinished as done:
        return _said_finished(done)
    if rundir.resumed and rundir.read("graded.jsonl"):
        raise UsageError(f"{rundir.path} already holds a graded replay; pick a new --name, or add --fresh")
    grader = Grader(args.data_dir, judge)
    try:
        lines = run_replay(rundir, answers, items, grader, short)
    finally:
        grader.close()
    return _finish(rundir, lines, None, {"mode": "replay", "question_set": qset.name})


async def _live(args: argparse.Namespace) -> int:
    from evalkit_evals.grader import Grader
    from evalkit_evals.prompting import template_hashes
    from evalkit_evals.question_set import load_manifest, parse_datasets, select_items
    from evalkit_evals.runner import Sampling, run_live

    if args.thinking is None:
        raise UsageError("--thinking off|low|medium|high is required (or --replay FILE)")
    from evalkit.commands.under_load import check_under_load

    load_spec = check_under_load(args)
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be at least 1")
    user_names, user = _user_evals(args.evals)
    datasets = parse_datasets(args.datasets) if args.datasets or not user_names else []
    datasets += [n for n in user_names if n not in datasets]
    qset = load_manifest(args.manifest)
    items = select_items(qset, datasets, args.limit, args.data_dir)
    judge, isolation = _code_judge(sorted({it.dataset for it in items}), args.unsafe_exec)
    full, short = _revisions(datasets, args.data_dir)
    max_tokens = args.max_tokens or DEFAULT_MAX_TOKENS[args.thinking]
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    temperature = args.temperature if args.temperature is not None else (0.7 if args.repeats > 1 else 0.0)
    manifest = {
        "mode": "live",
        "question_set": {"name": qset.name, "sha256": qset.sha256},
        "dataset_revisions": full,
        "seed": qset.raw.get("seed"),
        "thinking": args.thinking,
        "datasets": datasets,
        "limit": args.limit,
        "max_tokens": max_tokens,
        "repeats": args.repeats,
        "temperature": temperature,
        "prompt_templates": template_hashes(datasets),
        "code_isolation": isolation,
        **({"user_evals": user} if user else {}),
        **({"under_load": load_spec.to_json()} if load_spec is not None else {}),
    }
    # Which questions are asked (--datasets, --limit) is no condition of the measurement: a resume with a larger
    # limit asks the new ones alike, and the summary counts the questions asked for. Each dataset's revision is.
    options = {
        "--thinking": args.thinking,
        "--repeats": args.repeats,
        "--max-tokens": max_tokens,
        "--temperature": temperature,
        "--manifest": {"name": qset.name, "sha256": qset.sha256},
        "--eval": user,
        **{f"{ds} revision": rev for ds, rev in short.items()},
        "--under-load": load_spec.to_json() if load_spec is not None else None,
    }
    scope = {"datasets": datasets, "limit": args.limit}  # a complete run asked for more questions resumes
    async with open_run(args, "capability", manifest, options, scope) as ctx:
        concurrency = args.concurrency or ctx.profile.concurrency or 1
        body, system_prompt = thinking_params(ctx.profile, args.thinking)
        extra_body = {**ctx.profile.extra_body, **body}
        ctx.rundir.update_manifest(concurrency=concurrency, request_extra_body=extra_body, system_prompt=system_prompt)
        grader = Grader(args.data_dir, judge)
        wanted = {it.qid for it in items}
        under: dict[str, Any] = {}

        async def one_pass(graded: str = "graded.jsonl", tags: dict[str, Any] | None = None) -> None:
            await run_live(
                ctx.rundir,
                ctx.client,
                items,
                grader,
                short,
                extra_body,
                system_prompt,
                max_tokens,
                concurrency,
                Sampling(args.repeats, temperature),
                graded=graded,
                pass_tags=tags,
            )

        try:
            async with sample_gpu_memory(ctx.rundir, ctx.clock):
                if load_spec is None:
                    await one_pass()
                else:
                    from evalkit.commands.under_load import run_passes
                    from evalkit.load.background import BackgroundLoad

                    spec = load_spec
                    under = await run_passes(
                        ctx.rundir,
                        spec,
                        args.idle_run,
                        one_pass,
                        lambda write: BackgroundLoad(ctx.client, ctx.clock, spec, dict(ctx.profile.extra_body), write),
                        wanted,
                    )
        finally:
            grader.close()
        lines = [ln for ln in ctx.rundir.read("graded.jsonl") if ln["id"] in wanted]
        await ctx.evidence.end()
        return _finish(
            ctx.rundir,
            lines,
            args.thinking,
            {
                "mode": "live",
                "question_set": qset.name,
                "question_set_sha256": qset.sha256,
                **evidence_summary(ctx.rundir.path),
                "gpu_memory": summarize_gpu(ctx.rundir.read(GPU_FILE)),
                "client": client_lag(ctx.rundir.read("requests.jsonl")),
                **({"under_load": under} if under else {}),
            },
            [ctx.profile.api_key],
        )


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _said_finished(done: RunFinished) -> int:
    """A complete run started again: one line, its own table, its own exit code."""
    done.say()
    _print_summary(done.summary)
    print(done.path, flush=True)
    return done.exit_code


def run(args: argparse.Namespace) -> int:
    """Run `evalkit capability`."""
    if args.replay is not None:
        if args.under_load is not None:
            raise UsageError("--under-load asks a live server; it does not go with --replay")
        return _replay(args)
    try:
        return asyncio.run(_live(args))
    except RunFinished as done:
        return _said_finished(done)
