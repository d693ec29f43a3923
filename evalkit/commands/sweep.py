"""`evalkit sweep FILE`: start the server at each point of a sweep file, run the evalkit commands it names against
it, stop it, and go on; `evalkit report SWEEP_DIR` and `evalkit gate SWEEP_DIR` read the result."""

from __future__ import annotations

import argparse
import fnmatch
import shlex
import signal
import sys
from pathlib import Path

from evalkit.cli import add_output_options
from evalkit.errors import UsageError
from evalkit.runs.sweepdir import DONE, is_sweep_dir, read_state
from evalkit.sweep.lock import hold_sweep_dir
from evalkit.sweep.points import expand
from evalkit.sweep.rounds import plan_rounds, run_rounds
from evalkit.sweep.runner import SweepPlan, evalkit_argv, merge_state, new_state, run_name, run_sweep
from evalkit.sweep.sweep_file import load_sweep_file

EPILOG = """exit codes:
  0  every point this invocation ran (all, or those --only picks) completed: each command left a finished run
     (a command's own exit 1, e.g. wrong answers, is recorded in the state and its run, not a point failure)
  1  a point failed: its server did not start or crashed, a reset call failed, or a command left no finished run
     (the sweep goes on to the next point; sweep-state.json and the report say why, with the log's last lines)
  2  bad usage or input: the sweep file (one line naming the key), a placeholder no value fills, a sweep directory
     holding a point of the same name with other parameters

The sweep directory (--out/--name, default results/<sweep file's name>) holds sweep-state.json, the sweep file as
it started, and points/<point>/<run>/ run directories. Started again with the same --name it keeps the finished
points and resumes a half-run one. With [interleave] (rounds, seed) the file's two points run in alternating
rounds, each round's order drawn from the seed, into points/<point>/round-RR/<run>/; report and gate compare them
round by round (paired). See docs/sweep.md.
"""


def key_value(text: str) -> str:
    """`--set`: KEY=VALUE."""
    if "=" not in text or not text.split("=", 1)[0].strip():
        raise argparse.ArgumentTypeError(f"{text!r}: write KEY=VALUE, e.g. model=/models/x.gguf")
    return text


def _stop_on_term(signum: int, frame: object) -> None:
    # SIGTERM (a CI timeout, `timeout`) ends the sweep as Ctrl-C does: the point's server is stopped on the way out.
    raise KeyboardInterrupt


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit sweep`."""
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = EPILOG
    p.add_argument("file", type=Path, metavar="FILE", help="the sweep file (TOML; examples/sweeps/)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="set a template value of the file's [vars] (e.g. model=/models/x.gguf); repeatable",
    )
    p.add_argument(
        "--only",
        metavar="PATTERNS",
        help="run only the points whose names match one of these comma-separated shell patterns (np2-*,np1-b512)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the points and their commands; start nothing")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the points as Ray tasks on the cluster at ADDRESS ('auto': the local one), placed by each point's "
        "resources; the sweep directory must be at the same path on every node (docs/cluster.md)",
    )
    add_output_options(p, resumable=False)


def plan_from_args(args: argparse.Namespace) -> SweepPlan:
    """The validated sweep file, its points and the run's overrides."""
    sweep = load_sweep_file(args.file)
    overrides = dict(tuple(item.split("=", 1)) for item in args.overrides)
    unknown = sorted(set(overrides) - set(sweep.vars))
    if unknown:
        raise UsageError(f"--set {unknown[0]}: the sweep file's [vars] has no such key ({', '.join(sweep.vars)})")
    points = expand(sweep)
    baseline = sweep.baseline or points[0].name
    if baseline not in {p.name for p in points}:
        raise UsageError(
            f"{args.file}: baseline {baseline!r} is not a point (points: {', '.join(p.name for p in points)})"
        )
    if args.only:
        patterns = [x.strip() for x in args.only.split(",") if x.strip()]
        points = [p for p in points if any(fnmatch.fnmatchcase(p.name, pat) for pat in patterns)]
        if baseline not in {p.name for p in points}:
            raise UsageError(f"--only {args.only}: the baseline point {baseline} must be among the points run")
    name = args.name or sweep.name or args.file.stem
    rounds = plan_rounds(sweep.interleave, points, baseline) if sweep.interleave is not None else None
    if rounds is not None and args.ray:
        raise UsageError("--ray does not go with [interleave]: the two points alternate on one host")
    return SweepPlan(sweep, args.file, name, baseline, points, overrides, rounds)


def _dry_run(plan: SweepPlan, sweep_dir: Path) -> int:
    for point in plan.points:
        mark = " (baseline)" if point.name == plan.baseline else ""
        params = " ".join(f"{k}={v}" for k, v in point.params.items()) or "(no parameters)"
        res = f" (Ray resources {point.resources})" if point.resources else ""
        print(f"point {point.name}{mark}: {params}{res}")
        print(f"  server: {shlex.join(plan.server_command(sweep_dir, point, 'PORT'))}")
        tag = "{run}" if plan.sweep.reset.between == "restart" else "all"
        rnd = "round-RR" if plan.rounds is not None else None  # each round's folder (round-01, ...)
        log = Path(sweep_dir) / "points" / point.name / (rnd or "") / f"server-{tag}.log"
        for run in plan.sweep.run:
            print(f"  {run_name(run)}: {shlex.join(evalkit_argv(plan, run, sweep_dir, point, 'PORT', log, rnd))}")
    print(f"reset between commands: {plan.sweep.reset.between}")
    if plan.rounds is not None:
        print(f"interleaved: {plan.rounds.rounds} rounds, seed {plan.rounds.seed}; each round's order:")
        for r, order in enumerate(plan.rounds.order, 1):
            print(f"  round {r}: {' then '.join(order)}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run `evalkit sweep`."""
    plan = plan_from_args(args)
    sweep_dir = Path(args.out) / plan.name
    if args.dry_run:
        return _dry_run(plan, sweep_dir)
    if sweep_dir.exists() and any(sweep_dir.iterdir()) and not is_sweep_dir(sweep_dir):
        raise UsageError(f"{sweep_dir} exists and is not a sweep directory; pick another --name")
    if args.ray:
        # The cluster is joined before the sweep directory is made: a refused --ray leaves nothing behind that
        # would refuse the next sweep there (issue #56).
        from evalkit.cluster import connect, import_ray
        from evalkit.sweep.ray_runner import check_resources

        ray = import_ray()
        check_resources(plan)
        connect(ray, args.ray)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _stop_on_term)
    with hold_sweep_dir(sweep_dir):
        if is_sweep_dir(sweep_dir):
            state = merge_state(plan, read_state(sweep_dir), sweep_dir)
            print(f"resuming {sweep_dir}", file=sys.stderr, flush=True)
        else:
            state = new_state(plan)
            (sweep_dir / "sweep.toml").write_bytes(args.file.read_bytes())

        def say(text: str) -> None:
            print(text, file=sys.stderr, flush=True)

        if args.ray:
            from evalkit.sweep.ray_runner import run_sweep_ray

            state = run_sweep_ray(plan, sweep_dir, state, say, args.ray)
        elif plan.rounds is not None:
            state = run_rounds(plan, sweep_dir, state, say)
        else:
            state = run_sweep(plan, sweep_dir, state, say)
    for rec in state.points:
        line = f"{rec.name}: {rec.status}" + (f": {rec.failure}" if rec.failure else "")
        print(line, flush=True)
    print(sweep_dir, flush=True)
    ran = {p.name for p in plan.points}
    return 0 if all(p.status == DONE for p in state.points if p.name in ran) else 1
