"""Running a sweep: for each point not yet done, start the server, run each evalkit command against it (as its own
`python -m evalkit` process, so each run is the command a user would type), reset between commands, stop it.

The state file is written after every step, so a killed sweep started again keeps its finished points and resumes
the half-run one (its commands' runs resume by name, as every evalkit run does).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from evalkit.addresses import free_port, server_root
from evalkit.errors import UsageError
from evalkit.redact import scrub
from evalkit.runs.rundir import read_json_object
from evalkit.runs.sweepdir import (
    DONE,
    FAILED,
    RUNNING,
    CommandRecord,
    Interleave,
    PointRecord,
    SweepState,
    point_dir,
    round_tag,
    write_state,
)
from evalkit.sweep.leftovers import forget, remember, stop_leftovers
from evalkit.sweep.points import Point, command_line, fill, point_values
from evalkit.sweep.server_process import ServerProcess, ServerStartError, log_tail, start_server
from evalkit.sweep.sweep_file import ResetCall, RunSpec, SweepFile

Say = Callable[[str], None]


@dataclass
class SweepPlan:
    """A validated sweep file with its points, where it came from and the `--set` overrides."""

    sweep: SweepFile
    source: Path
    name: str
    baseline: str
    points: list[Point]
    overrides: dict[str, str] = field(default_factory=dict)
    rounds: Interleave | None = None  # `[interleave]`: the two points' rounds (evalkit.sweep.rounds)

    def command_names(self) -> list[tuple[str, RunSpec]]:
        """Each command a point runs, by its name in the state (`round-RR/RUN` in an interleaved sweep)."""
        if self.rounds is None:
            return [(run_name(r), r) for r in self.sweep.run]
        return [(f"{round_tag(i)}/{run_name(r)}", r) for i in range(1, self.rounds.rounds + 1) for r in self.sweep.run]

    def builtins(self, sweep_dir: Path, point: Point, port: str) -> dict[str, str]:
        """The placeholders the sweep fills itself."""
        return {
            "port": port,
            "point": point.name,
            "point_dir": str(point_dir(sweep_dir, point.name).resolve()),
            "sweep_dir": str(Path(sweep_dir).resolve()),
            "python": sys.executable,
        }

    def values(self, sweep_dir: Path, point: Point, port: str) -> dict[str, str]:
        """Everything a point's templates may name."""
        return point_values(self.sweep, point, self.overrides, self.builtins(sweep_dir, point, port))

    def server_command(self, sweep_dir: Path, point: Point, port: str) -> list[str]:
        """The server's argv at this point (a usage error when it fills to nothing)."""
        argv = command_line(self.sweep.server.command, self.values(sweep_dir, point, port), "[server] command")
        if not argv:
            raise UsageError(f"[server] command {self.sweep.server.command!r} fills to nothing at point {point.name}")
        return argv

    def run_args(self, run: RunSpec, sweep_dir: Path, point: Point, port: str) -> list[str]:
        """A [[run]]'s own options at this point."""
        return command_line(run.args, self.values(sweep_dir, point, port), f"[[run]] {run_name(run)} args")


def run_name(run: RunSpec) -> str:
    """The run directory's name in a point's folder."""
    return run.name or run.command


def now_utc() -> str:
    """Now, in UTC, to the second (as the state file records a point's start and end)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def evalkit_argv(
    plan: SweepPlan,
    run: RunSpec,
    sweep_dir: Path,
    point: Point,
    port: str,
    server_log: Path,
    round_tag: str | None = None,
) -> list[str]:
    """The evalkit command line of one [[run]] at one point (in one round of an interleaved sweep): the server's URL
    and log, the run's place in the sweep directory, and the point's identity for the manifest (`build_label` = the
    point, `build` = its flags)."""
    values = plan.values(sweep_dir, point, port)
    base_url = fill(plan.sweep.server.base_url, values, "[server] base_url")
    server_cmd = plan.server_command(sweep_dir, point, port)
    info = [f"sweep={plan.name}", f"sweep_point={point.name}", f"server_command={shlex.join(server_cmd)}"]
    info += [f"param.{k}={v}" for k, v in point.params.items()]
    out = point_dir(sweep_dir, point.name)
    if round_tag is not None:
        info.append(f"sweep_round={round_tag}")
        out = out / round_tag
    argv = [sys.executable, "-m", "evalkit", run.command, "--base-url", base_url]
    argv += ["--out", str(out), "--name", run_name(run), "--server-log", str(server_log)]
    # A resumed point's server starts on a new free port: its half-run commands resume there all the same.
    argv += ["--build-label", point.name, "--server-moved"]
    for item in info:
        argv += ["--build-info", item]
    return argv + plan.run_args(run, sweep_dir, point, port)


def _finished(run_dir: Path) -> bool:
    """Whether a run directory holds a finished, complete run."""
    try:
        man = read_json_object(run_dir / "manifest.json")
        summ = read_json_object(run_dir / "summary.json")
    except UsageError:
        return False
    return bool(man.get("finished")) and not man.get("incomplete") and not summ.get("incomplete")


def reset_calls(root_url: str, calls: list[ResetCall], timeout_s: float = 30.0) -> str | None:
    """Make each cache-clearing call; None when all answered 2xx, else one line saying which did not."""
    for c in calls:
        data = c.body.encode() if c.body is not None else (b"" if c.method == "POST" else None)
        req = urllib.request.Request(root_url + c.path, data=data, method=c.method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as r:
                if not 200 <= r.status < 300:
                    return f"reset {c.method} {c.path} answered HTTP {r.status}"
        except urllib.error.HTTPError as e:
            return f"reset {c.method} {c.path} answered HTTP {e.code}"
        except (urllib.error.URLError, OSError) as e:
            return f"reset {c.method} {c.path} failed: {scrub(str(e))}"
    return None


class PointRun:
    """One point's servers and commands (in one round, for an interleaved sweep); the state is written after every
    step."""

    def __init__(
        self, plan: SweepPlan, sweep_dir: Path, state: SweepState, point: Point, say: Say, round_tag: str | None = None
    ) -> None:
        self.plan, self.sweep_dir, self.state, self.point, self.say = plan, sweep_dir, state, point, say
        self.rec = state.point(point.name)
        self.round = round_tag
        self.dir = point_dir(sweep_dir, point.name) / round_tag if round_tag else point_dir(sweep_dir, point.name)
        self.label = f"{point.name} {round_tag}" if round_tag else point.name
        self.server: ServerProcess | None = None
        self.server_log: Path | None = None
        self.port = ""
        self.used = False  # a command has run against the current server
        self.leftovers_dir = sweep_dir  # where the pids of its server and command are kept (per point on Ray)

    def save(self) -> None:
        write_state(self.sweep_dir, self.state)

    def fail(self, reason: str, tail: list[str]) -> None:
        self.rec.status, self.rec.failure, self.rec.log_tail, self.rec.finished = FAILED, reason, tail, now_utc()
        self.save()
        self.say(f"point {self.label}: FAILED: {reason}")
        for ln in tail[-5:]:
            self.say(f"  | {ln}")

    def start(self, tag: str) -> bool:
        spec = self.plan.sweep.server
        self.port = str(free_port())
        values = self.plan.values(self.sweep_dir, self.point, self.port)
        cmd = self.plan.server_command(self.sweep_dir, self.point, self.port)
        self.rec.server_command = cmd
        out_log = self.dir / f"server-{tag}.log"
        own_log = Path(fill(spec.log, {**values, "start": tag}, "[server] log")) if spec.log else None
        self.server_log = own_log or out_log
        root = server_root(fill(spec.base_url, values, "[server] base_url"))
        cwd = (self.plan.source.parent / fill(spec.cwd, values, "[server] cwd")) if spec.cwd else None
        env = {k: fill(v, values, f"[server] env.{k}") for k, v in spec.env.items()}
        self.say(f"point {self.label}: starting {shlex.join(cmd)}")
        try:
            self.server = start_server(
                cmd,
                root,
                spec.health,
                out_log,
                spec.start_timeout_s,
                env,
                cwd,
                spec.stop_timeout_s,
                own_log,
                on_started=lambda pid: remember(self.leftovers_dir, "server", pid, cmd, group=True),
            )
        except ServerStartError as e:
            forget(self.leftovers_dir, "server")
            self.fail(f"did not start: {e.reason}", e.tail)
            return False
        self.used = False
        self.say(f"point {self.label}: healthy after {self.server.startup_s:.1f} s")
        return True

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(self.plan.sweep.server.stop_timeout_s)
            self.server = None
            forget(self.leftovers_dir, "server")

    def prepare(self, run: RunSpec) -> bool:
        """A server ready for the next command: started, restarted, or its caches cleared."""
        reset = self.plan.sweep.reset
        if self.server is not None and self.used and reset.between == "restart":
            self.stop()
        if self.server is None:
            return self.start(run_name(run) if reset.between == "restart" else "all")
        if self.used and reset.between == "http":
            problem = reset_calls(self.server.root_url, reset.calls)
            if problem:
                self.fail(problem, self.server.tail())
                return False
        return True

    def run_command(self, run: RunSpec, crec: CommandRecord) -> bool:
        assert self.server is not None and self.server_log is not None
        argv = evalkit_argv(self.plan, run, self.sweep_dir, self.point, self.port, self.server_log, self.round)
        out_path = self.dir / f"{run_name(run)}.out"
        self.say(f"point {self.label}: evalkit {run.command} --name {run_name(run)}")
        t0 = time.monotonic()
        with (
            open(out_path, "ab") as out,
            subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL) as proc,
        ):
            # In the sweep's own process group (Ctrl-C reaches it as it reaches the sweep), and named in the pid
            # file: a SIGKILLed sweep's next run stops it.
            remember(self.leftovers_dir, "command", proc.pid, argv, group=False)
            try:
                code = wait_saying(proc, out_path, lambda text: self.say(f"point {self.point.name}: {text}"), run)
            except BaseException:
                proc.kill()
                raise
            finally:
                forget(self.leftovers_dir, "command")
        self.used = True
        crec.exit_code = code
        if not self.server.alive:
            exit_code = self.server.process.returncode
            crec.failure = f"the server exited (code {exit_code}) during the run"
            self.fail(f"crashed during {run_name(run)}: the server exited with code {exit_code}", self.server.tail())
            self.server.stop(self.plan.sweep.server.stop_timeout_s)  # children its leader left behind
            self.server = None
            forget(self.leftovers_dir, "server")
            return False
        if not _finished(self.dir / run_name(run)):
            last = log_tail(out_path, 3)
            crec.failure = f"exit {code} without a finished run" + (f": {last[-1]}" if last else "")
        else:
            crec.failure = None
        self.say(f"point {self.label}: {run_name(run)} exit {code} ({time.monotonic() - t0:.1f} s)")
        self.save()
        return True

    def command_name(self, run: RunSpec) -> str:
        """The command's name in the state: the run's, under its round in an interleaved sweep."""
        return f"{self.round}/{run_name(run)}" if self.round else run_name(run)

    def commands(self) -> bool:
        """Run each command not finished earlier; False when the point failed on the way."""
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            for run in self.plan.sweep.run:
                crec = next(c for c in self.rec.commands if c.name == self.command_name(run))
                if crec.exit_code is not None and _finished(self.dir / run_name(run)):
                    crec.failure = None
                    self.say(f"point {self.label}: {crec.name} finished earlier, kept")
                    continue
                if not self.prepare(run) or not self.run_command(run, crec):
                    return False
        finally:
            self.stop()
        wanted = {self.command_name(r) for r in self.plan.sweep.run}
        broken = [c for c in self.rec.commands if c.failure and c.name in wanted]
        if broken:
            self.fail(f"{broken[0].name}: {broken[0].failure}", [])
            return False
        return True

    def go(self) -> None:
        self.rec.status, self.rec.started, self.rec.failure, self.rec.log_tail = RUNNING, now_utc(), None, []
        self.save()
        if not self.commands():
            return
        self.rec.status, self.rec.finished = DONE, now_utc()
        self.save()
        self.say(f"point {self.label}: done")

    def go_round(self, last: bool) -> None:
        """One round of an interleaved sweep: a failure of an earlier round stays the point's failure; the point is
        done after its last round when no round failed."""
        if self.rec.status != FAILED:
            self.rec.status = RUNNING
        self.rec.started = self.rec.started or now_utc()
        self.save()
        if self.commands():
            self.say(f"point {self.label}: done")
        if last and self.rec.status != FAILED:
            self.rec.status, self.rec.finished = DONE, now_utc()
            self.save()


def new_state(plan: SweepPlan) -> SweepState:
    """The state of a sweep not started yet: every point pending, every command not run."""
    commands = plan.command_names()
    points = [
        PointRecord(p.name, dict(p.params), commands=[CommandRecord(name, r.command) for name, r in commands])
        for p in plan.points
    ]
    return SweepState(plan.name, plan.baseline, points, plan.rounds)


def merge_state(plan: SweepPlan, old: SweepState, where: Path) -> SweepState:
    """The state to resume from: the old one with the plan's new points added (a point of the same name must have
    the same parameters; points the plan leaves out, e.g. by `--only`, are kept as they are)."""
    had = {p.name: p for p in old.points}
    changed = sorted(p.name for p in plan.points if p.name in had and had[p.name].params != p.params)
    if changed:
        raise UsageError(
            f"{where} holds point(s) {', '.join(changed)} with other parameters; give the sweep another --name"
        )
    old_rounds, new_rounds = old.interleave, plan.rounds
    if (old_rounds is None) != (new_rounds is None):
        what = "an interleaved" if old_rounds is not None else "a sweep that is not interleaved"
        raise UsageError(f"{where} holds {what} sweep and the file says otherwise; give the sweep another --name")
    if old_rounds is not None and new_rounds is not None:
        # the rounds run so far keep their order only with the same seed over the same two points
        if old_rounds.seed != new_rounds.seed or sorted(old_rounds.order[0]) != sorted(new_rounds.order[0]):
            raise UsageError(
                f"{where} was interleaved over {', '.join(sorted(old_rounds.order[0]))} with seed {old_rounds.seed}; "
                "give the sweep another --name to change them"
            )
        old.interleave = new_rounds
    for rec in old.points:
        names = [c.name for c in rec.commands]
        rec.commands += [CommandRecord(name, r.command) for name, r in plan.command_names() if name not in names]
    fresh = new_state(plan)
    old.points += [p for p in fresh.points if p.name not in had]
    old.baseline = plan.baseline
    return old


def run_sweep(plan: SweepPlan, sweep_dir: Path, state: SweepState, say: Say) -> SweepState:
    """Run every point not done yet, in order; a point that fails is recorded and the next one runs. A server or
    command a killed sweep left running is stopped first."""
    stop_leftovers(sweep_dir, say, plan.sweep.server.stop_timeout_s)
    write_state(sweep_dir, state)
    for point in plan.points:
        rec = state.point(point.name)
        if rec.status == DONE:
            say(f"point {point.name}: done earlier, kept")
            continue
        PointRun(plan, sweep_dir, state, point, say).go()
    return state


def wait_saying(proc: subprocess.Popen[bytes], out_path: Path, say: Callable[[str], None], run: RunSpec) -> int:
    """The command's exit code, once it ends; meanwhile a line at least every progress interval (evalkit.progress:
    25 s, `$EVALKIT_PROGRESS_INTERVAL_S`) saying it still runs, for how long, and the last line it wrote (its own
    progress: done/total, time left), so a sweep's log is never silent for a whole command (issue #58)."""
    from evalkit.progress import duration, interval_s

    t0 = time.monotonic()
    every = interval_s()
    while True:
        try:
            return proc.wait(timeout=every)
        except subprocess.TimeoutExpired:
            tail = log_tail(out_path, 1)
            last = f"; its last line: {tail[-1].strip()[:200]}" if tail else ""
            say(f"{run_name(run)} still running, {duration(time.monotonic() - t0)} so far{last}")
