"""`evalkit check`: what the server supports and how evalkit will talk to it, in under a minute.

Exit 0 when everything the chosen commands need works, 1 when something needed is missing (with what to change),
2 on bad input or an unreachable server. The table goes to the terminal, `check.json` into a run directory.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from evalkit.check import full_check
from evalkit.cli import add_output_options, add_server_options
from evalkit.client.probe import ALL_COMMANDS, CheckResult, Row
from evalkit.commands.target_flags import profile_from_args
from evalkit.config.argtypes import timeout_s
from evalkit.config.profiles import THINKING_MODES, manifest_fields, thinking_params
from evalkit.errors import UsageError
from evalkit.evidence.server_identity import identify
from evalkit.redact import scrub_tree
from evalkit.runs.run_identity import run_defines
from evalkit.runs.rundir import RunDir, RunFinished, default_run_name
from evalkit.session.connect import discover_model
from evalkit.session.context import print_run_path


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit check`."""
    add_server_options(p, client_procs=False, evidence=False)  # check reads no log, scrapes no metrics
    add_output_options(p)
    p.add_argument(
        "--for",
        dest="commands",
        default=",".join(ALL_COMMANDS),
        help=f"commands whose needs decide the exit code (default {','.join(ALL_COMMANDS)})",
    )
    p.add_argument(
        "--thinking",
        default="off,low",
        help="thinking modes to try with the profile's switch (default off,low; '' for none)",
    )
    p.add_argument(
        "--no-ignore-eos",
        dest="ignore_eos",
        action="store_false",
        help="do not send ignore_eos in the length probe (as bench and stress with --no-ignore-eos)",
    )
    p.add_argument("--timeout-s", type=timeout_s, default=30.0, help="time limit of each probe in seconds (default 30)")


def _parse(args: argparse.Namespace) -> tuple[tuple[str, ...], list[str]]:
    commands = tuple(c for c in args.commands.split(",") if c)
    bad = [c for c in commands if c not in ALL_COMMANDS]
    if bad or not commands:
        raise UsageError(f"--for takes a comma-separated subset of {','.join(ALL_COMMANDS)}")
    modes = [m for m in args.thinking.split(",") if m]
    if any(m not in THINKING_MODES for m in modes):
        raise UsageError(f"--thinking takes a comma-separated subset of {','.join(THINKING_MODES)}")
    return commands, modes


def _mark(row: Row) -> str:
    return {True: "yes", False: "NO", None: "?"}[row.supported]


def table(result: CheckResult, commands: tuple[str, ...]) -> str:
    """The support table as terminal text."""
    lines = [f"{'feature':<27} {'ok':<4} detail", f"{'-' * 27} {'-' * 4} {'-' * 40}"]
    for r in result.rows:
        needed = (
            "  [needed by " + ",".join(c for c in r.needed_by if c in commands) + "]"
            if r.supported is False and set(r.needed_by) & set(commands)
            else ""
        )
        advice = f" ({r.fix})" if r.fix and r.supported is False and not needed else ""
        lines.append(f"{r.name:<27} {_mark(r):<4} {r.detail}{advice}{needed}")
    return "\n".join(lines)


def verdict(result: CheckResult, commands: tuple[str, ...]) -> tuple[int, list[str]]:
    """Exit code and the lines that explain it."""
    if result.unreachable is not None:  # it answered GET /models, then took no connection: gone (issue #56)
        return 2, [f"cannot reach server at {result.base_url}: no connection for evalkit's request"]
    missing = result.missing(commands)
    if not missing:
        return 0, [f"ok: this server supports what {', '.join(commands)} need"]
    return 1, [
        f"missing for {', '.join(c for c in commands if any(c in r.needed_by for r in missing))}: "
        f"{r.name}: {r.fix or r.detail}"
        for r in missing
    ]


async def _check(args: argparse.Namespace, commands: tuple[str, ...], modes: list[str]) -> int:
    profile = profile_from_args(args)
    model = await discover_model(profile)  # unreachable: UsageError, exit 2, one line
    thinking: dict[str, Any] = {m: thinking_params(profile, m) for m in modes}
    key = profile.api_key
    identity = scrub_tree(
        await identify(profile.base_url or "", {"Authorization": f"Bearer {key}"} if key else None), (key,)
    )
    try:
        rundir = RunDir.create(
            args.out,
            args.name or default_run_name("check"),
            "check",
            {
                **manifest_fields(profile),
                "model": model,
                "check": {"for": list(commands)},
                "server_identity": identity,
            },
            secrets=(key,),
            defines=run_defines(
                profile.base_url, model, identity, {"--for": list(commands), "--thinking": modes, **_flags(args)}
            ),
            fresh=args.fresh,
            server_moved=args.server_moved,
        )
    except RunFinished as done:  # a check says what it found when it ran: its check.json, its exit code
        done.say()
        print(done.path, flush=True)
        return done.exit_code
    result = await full_check(
        profile.base_url or "",
        model,
        key,
        dict(profile.extra_body),
        thinking,
        timeout_s=args.timeout_s,
        identity=identity,
        ignore_eos=args.ignore_eos,
    )
    print(f"evalkit check: {profile.base_url}  model {model}  thinking style {profile.thinking}")
    print(table(result, commands))
    code, lines = verdict(result, commands)
    print("\n".join(lines), flush=True)
    rundir.update_manifest(
        field_support=scrub_tree(
            {**(result.fields.to_json() if result.fields else {}), "not_sent": sorted(result.omit_fields)}, (key,)
        )
    )
    rundir.write_json("check.json", scrub_tree({**result.to_json(), "for": list(commands), "exit": code}, (key,)))
    rundir.finish(exit_code=code)
    print_run_path(rundir)
    return code


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    return {"--no-ignore-eos": not args.ignore_eos}


def run(args: argparse.Namespace) -> int:
    """Run the probes and print the table."""
    commands, modes = _parse(args)
    return asyncio.run(_check(args, commands, modes))
