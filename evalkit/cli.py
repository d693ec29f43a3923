"""The `evalkit` command line: common options, one subcommand module per command, contract exit codes."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from evalkit import __version__
from evalkit.config.argtypes import (
    Parser,
    base_url,
    build_info,
    env_name,
    nonneg_float,
    positive_int,
    run_name,
    writable_dir,
    writable_file,
)
from evalkit.errors import UsageError
from evalkit.eventloop import fast_loop
from evalkit.redact import ScrubbingWriter

# name -> module under evalkit.commands exposing add_arguments(parser) and run(args) -> int
# In the order a user meets them: try the demo, check a server, measure it, compare, gate; the sim last.
COMMANDS: dict[str, str] = {
    "demo": "start a sim, run bench + stress + capability against it, render a report",
    "check": "preflight: what the server supports and how evalkit will talk to it",
    "bench": "code / math / prose decode throughput, single and concurrent",
    "capability": "the pinned 140-question capability set (GSM8K, MATH-500, MuSR, HumanEval+)",
    "stress": "the seeded long-prefill / short-insert / cancel / concurrent stress scheduler",
    "load": "capacity: latency and goodput under closed- or open-loop load; the largest load meeting targets",
    "sweep": "start the server at each launch configuration of a sweep file and run commands against it",
    "report": "markdown before/after tables from run directories (or one sweep directory)",
    "gate": "release gate: check run summaries against TOML rules",
    "export": "one run's requests and grades as a CSV or Parquet table, for notebooks",
    "sim": "the simulated OpenAI-compatible inference server",
}
# Commands whose module lives elsewhere: the sim's command stays beside the sim (`python -m evalkit.sim` needs no CLI).
MODULES = {"sim": "evalkit.sim.command"}
# Output files and directories, checked writable before any work starts: attribute -> the flag that sets it.
OUTPUT_FILES = {"output": "-o/--output", "junit": "--junit", "changed_only": "--changed-only"}


def add_server_options(p: argparse.ArgumentParser, client_procs: bool = True, evidence: bool = True) -> None:
    """Options every command that talks to a server takes (contract); `check` leaves out what it does not use."""
    g = p.add_argument_group("server")
    g.add_argument(
        "--base-url",
        type=base_url,
        help="OpenAI-compatible base URL (default: $EVALKIT_BASE_URL, $OPENAI_BASE_URL, else http://127.0.0.1:8000/v1)",
    )
    g.add_argument("--model", help="model id (default: the first id /v1/models lists)")
    g.add_argument(
        "--api-key-env",
        type=env_name,
        metavar="NAME",
        help="name of the environment variable holding "
        "the API key (default OPENAI_API_KEY; a name given must be set); the key itself is never a flag",
    )
    g.add_argument("--server", help="a server profile named in the config file")
    g.add_argument("--config", type=Path, help="config file with server profiles (default ./evalkit.toml)")
    if client_procs:
        g.add_argument(
            "--client-procs",
            type=positive_int,
            default=1,
            metavar="K",
            help="read the streams in K client processes, each with its own event loop (for more streams "
            "than one core can read; default 1)",
        )
    if evidence:
        add_evidence_options(p)


def add_evidence_options(p: argparse.ArgumentParser) -> None:
    """What the server says about itself: its log, its /metrics, and the build identity the user adds."""
    g = p.add_argument_group("server evidence")
    g.add_argument(
        "--server-log",
        type=Path,
        metavar="FILE",
        help="follow the server's log file during the run into server_log.jsonl, flagging known lines",
    )
    g.add_argument(
        "--metrics-interval",
        type=nonneg_float,
        metavar="S",
        help="also scrape /metrics every S seconds during the run (default: stress 1, others 0 = "
        "only before and after)",
    )
    g.add_argument(
        "--no-metrics", dest="metrics", action="store_false", help="do not scrape the server's Prometheus /metrics"
    )
    g.add_argument(
        "--build-label",
        help="label of the server build in manifest and reports (default: the "
        "profile's build.label, else the profile name)",
    )
    g.add_argument(
        "--build-info",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        type=build_info,
        help="build metadata for the manifest, e.g. commit=a2bf07fd or flags='--max_batch 2' (repeatable)",
    )


def add_output_options(p: argparse.ArgumentParser, resumable: bool = True) -> None:
    """Where a run directory goes; `resumable`: also `--fresh` and `--server-moved` (a command writing one run)."""
    g = p.add_argument_group("output")
    g.add_argument("--out", type=Path, default=Path("results"), help="parent of run directories (default results/)")
    g.add_argument(
        "--name",
        type=run_name,
        help="run name, one path component of at most 128 characters (default: "
        "kind + timestamp); an existing name resumes that run when server, model and options match",
    )
    if not resumable:
        return
    g.add_argument(
        "--fresh",
        action="store_true",
        help="start the run over: delete what an existing --name holds first (default: resume it)",
    )
    g.add_argument(
        "--server-moved",
        action="store_true",
        help="resume an existing --name although the server's URL changed (the same server restarted elsewhere; "
        "its model, build and the options must still match)",
    )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `only`, just that subcommand's module is imported (the others' heavy imports wait)."""
    parser = Parser(prog="evalkit", description="Before/after checks for self-hosted OpenAI-compatible LLM servers.")
    parser.add_argument("--version", action="version", version=f"evalkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name, help_text in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            mod = importlib.import_module(MODULES.get(name, f"evalkit.commands.{name}"))
            mod.add_arguments(sp)
            sp.set_defaults(_run=mod.run)
    return parser


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of subcommand `name` (its errors then read `evalkit NAME: error: ...`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]  # type: ignore[no-any-return]
    return parser


def unknown_flags_words(p: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """`unrecognized arguments: --modle x; did you mean --model?` for flags the command does not take."""
    import difflib

    flags = [s for a in p._actions for s in a.option_strings if s.startswith("--")]
    hints = []
    for token in extra:
        if token.startswith("--"):
            near = difflib.get_close_matches(token.split("=", 1)[0], flags, n=1, cutoff=0.75)
            if near:
                hints.append(f"did you mean {near[0]} (for {token.split('=', 1)[0]})?")
    return f"unrecognized arguments: {' '.join(extra)}" + (f"; {' '.join(hints)}" if hints else "")


def _chosen_command(argv: Sequence[str]) -> str | None:
    for token in argv:
        if not token.startswith("-"):
            return token if token in COMMANDS else None
    return None


def check_outputs(args: argparse.Namespace) -> None:
    """Exit 2 before any work when an output path of the command cannot be written."""
    out = getattr(args, "out", None)
    if isinstance(out, Path):
        writable_dir(out, "--out")
    for attr, flag in OUTPUT_FILES.items():
        path = getattr(args, attr, None)
        if isinstance(path, Path):
            writable_file(path, flag)
            _make_parent(path, flag)
    log = getattr(args, "bisect_log", None)
    if isinstance(log, Path):
        writable_file(log, "--bisect-log")
        _make_parent(log, "--bisect-log")


def _make_parent(path: Path, flag: str) -> None:
    # A missing folder of an output file is made now, before the work: the writers (report, JUnit, export) then
    # never fail on it after minutes of work.
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot create {path.parent}: {e.strerror or e}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code. A Ctrl-C at any moment, the command's imports included, is one
    line and 130 (issue #56)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        sys.stderr.write("evalkit: interrupted\n")
        return 130


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = _chosen_command(argv)
    parser = build_parser(only=chosen or "")
    if not argv:  # bare `evalkit`: the help, which lists the commands, not an error
        parser.print_help()
        return 0
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # a flag the command does not take: said by the command, with the nearest it does take
            _subparser(parser, args.command).error(unknown_flags_words(_subparser(parser, args.command), extra))
    except SystemExit as e:  # a bad flag (one line already written) or --help: the exit code, returned
        return e.code if isinstance(e.code, int) else 0
    out, err = sys.stdout, sys.stderr
    if args.command != "sim":  # the last edge before the screen: nothing printed carries the key
        keys = _run_secrets(args)
        sys.stdout, sys.stderr = ScrubbingWriter(out, keys), ScrubbingWriter(err, keys)
    try:
        check_outputs(args)
        # Every command's client reads its streams on this loop; the simulator keeps the loop it was tuned on.
        with fast_loop(enabled=args.command != "sim"):
            return int(args._run(args) or 0)
    except UsageError as e:
        sys.stderr.write(f"evalkit {args.command}: error: {e}\n")
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("evalkit: interrupted\n")
        return 130
    except Exception:  # noqa: BLE001 - a bug's traceback, printed here so it passes the scrubbing writer too (exit 1 as uncaught)
        import traceback

        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = out, err


def _run_secrets(args: argparse.Namespace) -> tuple[str, ...]:
    # The key of the server profile the flags name, resolved here once for the whole run (the command reads the
    # same profile, `args.resolved_profile`), else of the default variable.
    from evalkit.commands.target_flags import resolve_from_args

    try:
        key = resolve_from_args(args).api_key
    except Exception:  # noqa: BLE001 - a bad profile is the command's own usage error, reported by it
        key = os.environ.get(getattr(args, "api_key_env", None) or "OPENAI_API_KEY")
    return (key,) if key else ()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
