"""`evalkit capability`: the pinned 140-question set against a server, or `--replay` of recorded answers."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from evalkit.cli import add_output_options, add_server_options
from evalkit.commands.baseline_run import baseline_run_dir
from evalkit.commands.target_flags import run_options_from_args, target_from_args
from evalkit.config.argtypes import base_url, env_name, nonneg_float, positive_int, timeout_s
from evalkit.config.profiles import THINKING_MODES, refuse_unsendable_key
from evalkit.errors import UsageError
from evalkit.runs.run_identity import run_defines
from evalkit.runs.rundir import RunDir, RunFinished, default_run_name
from evalkit.runs.schemas import CapabilitySummary, KindSummary, as_kind
from evalkit.session.measurement import finish_run, run_measurement, show_result, started_again
from evalkit_evals.measure import GRADED, open_judge, score_run
from evalkit_evals.plan import (
    DEFAULT_MAX_TOKENS,
    CapabilityPlan,
    capability_measurement,
    code_judge,
    revisions,
    user_evals,
)
from evalkit_evals.repeats_auto import (
    DEFAULT_MARGIN,
    DEFAULT_MAX_REPEATS,
    RepeatsRule,
)


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
    g.add_argument(
        "--timeout-s",
        type=timeout_s,
        default=900.0,
        help="per-request timeout in seconds; a request past it is graded error (default 900)",
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
        type=_repeats,
        default=1,
        help="ask each question K times; pass@1 is the mean over repeats (default %(default)s); 'auto': round after "
        "round until each dataset's pass@1 is sure within --margin (docs/until-sure.md)",
    )
    g.add_argument(
        "--max-repeats",
        type=positive_int,
        help=f"with --repeats auto: the most rounds (default {DEFAULT_MAX_REPEATS})",
    )
    g.add_argument(
        "--margin",
        type=nonneg_float,
        help=f"with --repeats auto: pass@1's interval half-width that is sure (default {DEFAULT_MARGIN})",
    )
    g.add_argument(
        "--baseline",
        metavar="RUN_DIR",
        help="with --repeats auto: stop when each dataset's comparison with this capability run's answers is decided "
        "(beyond noise, or equivalent within --margin) instead of its pass@1 interval (docs/until-sure.md)",
    )
    g.add_argument(
        "--temperature",
        type=nonneg_float,
        help="sampling temperature (default 0, or 0.7 with --repeats above 1; sampled repeats send seed 0..K-1)",
    )
    g.add_argument("--manifest", default="capability-140-v1", help="pinned question manifest (default %(default)s)")
    g.add_argument(
        "--replay",
        type=Path,
        help="grade recorded answers from a JSONL file, each line its own case; no server needed",
    )
    j = p.add_argument_group("judge (a second opinion on the lines the rules are unsure of)")
    j.add_argument(
        "--judge-url",
        type=base_url,
        metavar="URL",
        help="an OpenAI-compatible server asked, line by line, whether an unsure grade's answer equals the "
        "reference; its verdict is stored as `judge` beside the rule's grade (never replacing `correct`) and settles "
        "the unsure grade in the sure score",
    )
    j.add_argument("--judge-model", metavar="NAME", help="the judge's model id (required with --judge-url)")
    j.add_argument(
        "--judge-self",
        action="store_true",
        help="live runs: the served model itself reads the final answer of each unsure line (a fixed extraction "
        "prompt, temperature 0) and evalkit's rules grade what it read; stored as `judge` with `extractor: true`",
    )
    j.add_argument(
        "--judge-api-key-env",
        type=env_name,
        metavar="NAME",
        help="name of the environment variable holding the judge's API key (default: none sent)",
    )
    from evalkit.commands.under_load import add_under_load_arguments

    add_under_load_arguments(g)
    g.add_argument(
        "--unsafe-exec",
        action="store_true",
        help="run HumanEval+ code without bubblewrap, with resource "
        "limits only (recorded in the manifest); without it a missing bubblewrap is exit 2",
    )


def _judge_settings(args: argparse.Namespace) -> Any:
    """`--judge-url`, `--judge-model` and the key from `--judge-api-key-env` (never echoed); `--judge-self`: the
    served model as the extractor; None without a judge."""
    if getattr(args, "judge_self", False):
        if args.judge_url is not None or args.replay is not None:
            raise UsageError("--judge-self asks the served model: not with --judge-url, nor with --replay")
        from evalkit_evals.model_judge import JudgeSettings

        profile = target_from_args(args).profile
        return JudgeSettings(profile.base_url or "", profile.model or "", profile.api_key, extract=True)
    if args.judge_url is None:
        if args.judge_model is not None or args.judge_api_key_env is not None:
            raise UsageError("--judge-model and --judge-api-key-env go with --judge-url")
        return None
    if not args.judge_model:
        raise UsageError("--judge-url needs --judge-model NAME (the judge's model id)")
    key = None
    if args.judge_api_key_env is not None:
        key = os.environ.get(args.judge_api_key_env)
        if not key:
            raise UsageError(f"--judge-api-key-env {args.judge_api_key_env}: that environment variable is not set")
        refuse_unsendable_key(args.judge_api_key_env, key)
    from evalkit_evals.model_judge import JudgeSettings

    return JudgeSettings(args.judge_url, args.judge_model, key)


def _check_resume(args: argparse.Namespace, fields: dict[str, Any]) -> None:
    """A run started again under its `--name` resumes only with the same `fields` (the replay file's hash, the
    judge): checked before the run directory is reopened, so a refused resume leaves the old run as it was."""
    if args.name is None:
        return
    path = Path(args.out) / args.name / "manifest.json"
    if not path.is_file():
        return
    from evalkit.runs.rundir import read_json_object

    old = read_json_object(path)
    if old.get("kind") != "capability":
        return  # RunDir.create says whose run it is
    for key, now in fields.items():
        before = old.get(key)
        if before == now:
            continue
        if key == "replay_sha256":
            raise UsageError(f"{path.parent} holds the replay of another file; pick a new --name")
        raise UsageError(
            f"{path.parent} was graded with judge {before and before.get('model')!r}, not "
            f"{now and now.get('model')!r}; resume it with the same --judge-url/--judge-model, or pick a new --name"
        )


def _judged(judge_settings: Any) -> Any:
    """The end-of-run printer for a run that has `judge_settings` (None: no judge asked for)."""
    return lambda summary: _print_summary(summary, judge_settings)


def _print_summary(record: KindSummary, judge_settings: Any = None) -> None:
    """The table and the lines under it, as a run prints them at its end (and again when started finished)."""
    from evalkit_evals.scoreboard import table

    summary = as_kind(record, CapabilitySummary)
    raw = summary.to_json()
    truncated = summary.truncated_answers or 0
    warning = summary.thinking_warning
    print(table(raw))
    p1 = summary.total.pass_at_1
    if p1:
        print(
            f"pass@1 {p1.value:.3f} (95% interval {p1.ci95[0]:.3f} to {p1.ci95[1]:.3f}) over "
            f"{p1.questions} questions x {p1.repeats} repeats; repeats agree on {p1.agreement:.0%}"
        )
    if truncated:
        print(f"{truncated} answer(s) hit max_tokens (finish_reason length)")
    if judge_settings is not None and not summary.judge:
        # --judge-url given, nothing sent: said, so the flag is seen to have been taken (issue #58).
        print(
            f"judge {judge_settings.model} ({judge_settings.base_url}): asked about 0 of {summary.total.total} "
            "lines: no grade was unsure, so nothing was sent to it; the score is the rules'"
        )
    if summary.judge:
        from evalkit_evals.model_judge import describe_counts

        print(describe_counts(raw["judge"], summary.total.total))
        errors = summary.judge.verdicts["error"]
        if errors:
            sys.stderr.write(f"warning: the judge could not be asked about {errors} line(s); their rule grades stand\n")
    if summary.under_load:
        from evalkit.commands.under_load import describe

        print(describe(summary.under_load))
    if warning:
        sys.stderr.write(f"warning: {warning}\n")
        print(f"warning: {warning}")
    client = summary.client_timing()
    if client is not None and client.note:
        sys.stderr.write(f"warning: {client.note}\n")


def _replay(args: argparse.Namespace) -> int:
    return asyncio.run(_replay_async(args))


async def _replay_async(args: argparse.Namespace) -> int:
    import hashlib

    from evalkit_evals.grader import Grader
    from evalkit_evals.prompting import template_hashes
    from evalkit_evals.question_set import items_by_id, load_manifest
    from evalkit_evals.runner import check_replay_datasets, check_replay_ids, read_replay, run_replay

    judge_settings = _judge_settings(args)
    answers = read_replay(args.replay)
    _, user = user_evals(tuple(args.evals or ()))
    check_replay_datasets(args.replay, answers)
    qset = load_manifest(args.manifest)
    items = items_by_id([a.qid for a in answers], args.data_dir)
    check_replay_ids(args.replay, answers, items)
    datasets = sorted({it.dataset for it in items.values()})
    judge_code, isolation = code_judge(datasets, args.unsafe_exec)
    full, short = revisions(datasets, args.data_dir)
    judge = await open_judge(judge_settings, args.concurrency or 4)
    name = args.name or default_run_name("capability")
    manifest = {
        "mode": "replay",
        "replay_file": str(args.replay),
        "replay_sha256": hashlib.sha256(args.replay.read_bytes()).hexdigest(),
        "question_set": {"name": qset.name, "sha256": qset.sha256},
        "dataset_revisions": full,
        "seed": qset.raw.get("seed"),
        "thinking": None,
        "prompt_templates": template_hashes(datasets),
        "code_isolation": isolation,
        **({"user_evals": user} if user else {}),
        **({"judge": judge_settings.manifest()} if judge_settings is not None else {}),
    }
    judged = judge_settings.manifest() if judge_settings is not None else None
    options = {
        "--replay": {"file": str(args.replay), "sha256": manifest["replay_sha256"]},
        "--manifest": {"name": qset.name, "sha256": qset.sha256},
        "--eval": user,
        "--judge": judged,
        **{f"{ds} revision": rev for ds, rev in short.items()},
    }
    try:
        if not args.fresh:
            _check_resume(args, {"replay_sha256": manifest["replay_sha256"], "judge": judged})
        secrets = (judge_settings.api_key,) if judge_settings is not None else ()
        try:
            rundir = RunDir.create(
                args.out,
                name,
                "capability",
                manifest,
                secrets,
                defines=run_defines(None, None, None, options),
                fresh=args.fresh,
            )
        except RunFinished as done:
            return show_result(started_again(done), _judged(judge_settings))
        grader = Grader(args.data_dir, judge_code)
        try:
            lines = await run_replay(rundir, answers, items, grader, short, judge)
        finally:
            grader.close()
    finally:
        if judge is not None:
            await judge.aclose()
    got = score_run(lines, None, {"mode": "replay", "question_set": qset.name}, per_line=True)
    return show_result(finish_run(rundir, got), _judged(judge_settings))


def _live(args: argparse.Namespace) -> int:
    if args.thinking is None:
        raise UsageError("--thinking off|low|medium|high is required (or --replay FILE)")
    judge_settings = _judge_settings(args)
    from evalkit.commands.under_load import check_under_load
    from evalkit.under_load import under_load_passes

    load_spec = check_under_load(args)
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be at least 1")
    auto = _repeats_auto(args, under_load=load_spec is not None)
    plan = CapabilityPlan(
        thinking=args.thinking,
        datasets=tuple(args.datasets.split(",")) if args.datasets else (),
        user_evals=tuple(args.evals or ()),
        limit=args.limit,
        question_set=args.manifest,
        data_dir=args.data_dir,
        max_tokens=args.max_tokens,
        repeats=args.repeats,
        repeats_auto=auto,
        margin_given=args.margin is not None,
        temperature=args.temperature,
        timeout_s=args.timeout_s,
        concurrency=args.concurrency,
        unsafe_exec=args.unsafe_exec,
        judge=judge_settings,
        under_load=under_load_passes(load_spec, args.idle_run) if load_spec is not None else None,
        under_load_spec=load_spec.to_json() if load_spec is not None else None,
    )
    measurement = capability_measurement(plan)
    if not args.fresh:
        _check_resume(args, {"judge": judge_settings.manifest() if judge_settings is not None else None})
    return run_measurement(target_from_args(args), run_options_from_args(args), measurement, _judged(judge_settings))


def _repeats(text: str) -> int | str:
    """`--repeats K` or `--repeats auto`."""
    return "auto" if text == "auto" else int(positive_int(text))


def _repeats_auto(args: argparse.Namespace, under_load: bool) -> RepeatsRule | None:
    """`--repeats auto`'s rule (args.repeats becomes its most rounds); at temperature 0 one pass, said so."""
    if args.repeats != "auto":
        for flag, v in (("--max-repeats", args.max_repeats), ("--margin", args.margin), ("--baseline", args.baseline)):
            if v is not None:
                raise UsageError(f"{flag} needs --repeats auto")
        return None
    if under_load:
        raise UsageError("--repeats auto cannot be combined with --under-load (one pass each, idle and loaded)")
    if args.temperature == 0:
        print(
            "note: --repeats auto at --temperature 0: every repeat is the same answer, one pass is all there is",
            file=sys.stderr,
            flush=True,
        )
        args.repeats = 1
        return None
    rule = RepeatsRule(
        margin=DEFAULT_MARGIN if args.margin is None else args.margin,
        max_repeats=args.max_repeats or DEFAULT_MAX_REPEATS,
        baseline=str(baseline_run_dir(args.baseline, "capability", GRADED).resolve()) if args.baseline else None,
    )
    if not 0 < rule.margin < 0.5:
        raise UsageError(f"--margin {rule.margin}: pass@1's half-width, between 0 and 0.5 (0.05 is ±5 points)")
    if rule.max_repeats < 2:
        raise UsageError("--max-repeats must be at least 2 (one round cannot be sure)")
    args.repeats = rule.max_repeats
    return rule


def run(args: argparse.Namespace) -> int:
    """Run `evalkit capability`."""
    if args.replay is not None:
        if args.under_load is not None:
            raise UsageError("--under-load asks a live server; it does not go with --replay")
        return _replay(args)
    return _live(args)
