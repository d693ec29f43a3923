"""`evalkit sweep FILE --ray ADDRESS`: each point not done yet is one Ray task, placed by the resources the sweep file
names for it (a host label such as `{gpu_2080ti = 2}`); points on different nodes run at once, points that need the
same node queue there (Ray's scheduler holds a task until its resources are free).

The task runs the point exactly as a local sweep does (evalkit/sweep/runner.py's `PointRun`: its server on its node,
each command as its own `python -m evalkit` process with evalkit's client), into the sweep directory, which every node
must reach at the same path (a shared `--out`: NFS, or one machine). Only the coordinator writes sweep-state.json: a
task keeps its point's record in `points/<point>/point-state.json` and its server's and command's pids in the point's
own pid file, and returns the record when it ends. A node lost mid-point fails that point only (its record says so);
its server and command are stopped by the point's watchdog (`watchdog.py`) as soon as the task's worker is gone,
and started again, the sweep re-runs the point, first stopping whatever is still there.

Ray is imported only here, only with `--ray`: without Ray installed that is one line naming the extra (exit 2).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from evalkit.cluster import connect, import_ray
from evalkit.errors import UsageError
from evalkit.runs.rundir import read_json_object, write_json_atomic
from evalkit.runs.sweepdir import DONE, FAILED, PointJson, PointRecord, SweepState, point_dir, write_state
from evalkit.sweep.leftovers import start_time, stop_leftovers
from evalkit.sweep.points import Point
from evalkit.sweep.runner import PointRun, Say, SweepPlan, now_utc

POINT_STATE = "point-state.json"


class _RayPointRun(PointRun):
    """A point run inside a Ray task: its record saved beside its runs, its pids in its own folder."""

    def __init__(self, plan: SweepPlan, sweep_dir: Path, state: SweepState, point: Point, say: Say) -> None:
        super().__init__(plan, sweep_dir, state, point, say)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.leftovers_dir = self.dir

    def save(self) -> None:
        write_json_atomic(self.dir / POINT_STATE, self.rec.to_json())


def run_point_task(plan: SweepPlan, sweep_dir: str, record: PointJson, point: Point) -> PointJson:
    """The body of one point's Ray task: the point run from its record so far; its record when it ends."""
    import socket

    host = socket.gethostname()

    def say(text: str) -> None:
        print(f"[{host}] {text}", flush=True)

    where = Path(sweep_dir)
    state = SweepState(plan.name, plan.baseline, [PointRecord.from_json(record)])
    stop_leftovers(point_dir(where, point.name), say, plan.sweep.server.stop_timeout_s)
    guard = _watchdog(point_dir(where, point.name), plan.sweep.server.stop_timeout_s)
    try:
        _RayPointRun(plan, where, state, point, say).go()
    finally:
        if guard is not None:
            guard.kill()
            guard.wait()
    return state.points[0].to_json()


def _watchdog(directory: Path, stop_timeout_s: float) -> subprocess.Popen[bytes] | None:
    """A process of its own that stops the point's server and command if this task's worker dies first (its node
    lost): they do not run on until the next sweep (issue #56). None where it cannot start."""
    started = start_time(os.getpid())
    if started is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "evalkit.sweep.watchdog", str(os.getpid()), started, str(directory)]
            + [str(stop_timeout_s)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


def check_resources(plan: SweepPlan) -> None:
    """One line (exit 2) when a point names no resources (checked before the sweep directory is made)."""
    bare = [p.name for p in plan.points if not p.resources]
    if bare:
        raise UsageError(
            f"--ray: point(s) {', '.join(bare[:3])} name no resources: give the sweep file a top-level `resources` "
            "(or one per [[point]]) naming what a point holds, e.g. {gpu_2080ti = 2}, so that two points never share "
            "one node's GPUs (docs/cluster.md)"
        )


def run_sweep_ray(plan: SweepPlan, sweep_dir: Path, state: SweepState, say: Say, address: str) -> SweepState:
    """Every point not done yet as a Ray task on the cluster at `address` (`auto`: the local one); the state file
    written as each point ends. A task that dies with its node or worker fails its point."""
    ray = import_ray()
    check_resources(plan)
    plan = replace(plan, source=plan.source.resolve())  # the task's worker has its own working directory
    connect(ray, address)
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        say(f"ray: {len(nodes)} node(s) at {address}")
        # no retry: a point whose node died fails, and the user's next start re-runs it (what a local sweep does)
        task = ray.remote(max_retries=0, num_cpus=0)(run_point_task)
        running: dict[Any, Point] = {}
        for point in plan.points:
            rec = state.point(point.name)
            if rec.status == DONE:
                say(f"point {point.name}: done earlier, kept")
                continue
            say(f"point {point.name}: sent to Ray (needs {point.resources})")
            ref = task.options(resources=point.resources).remote(plan, str(sweep_dir.resolve()), rec.to_json(), point)
            running[ref] = point
        write_state(sweep_dir, state)
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                point = running.pop(ref)
                idx = next(i for i, p in enumerate(state.points) if p.name == point.name)
                try:
                    state.points[idx] = PointRecord.from_json(ray.get(ref))
                except ray.exceptions.RayError as e:
                    rec = state.points[idx]
                    kept = point_dir(sweep_dir, point.name) / POINT_STATE
                    if kept.is_file():  # the commands it finished before it died are kept
                        rec = state.points[idx] = PointRecord.from_json(cast(PointJson, read_json_object(kept)))
                    # Ray's first sentence ("Task failed because the node it was running on is dead ..."); the
                    # rest is advice about Ray's own logs
                    text = str(e).strip()
                    reason = text.splitlines()[0].split(". ")[0] if text else type(e).__name__
                    rec.status, rec.failure, rec.finished = FAILED, f"its Ray task died: {reason}", now_utc()
                write_state(sweep_dir, state)
                rec = state.points[idx]
                say(f"point {point.name}: {rec.status}" + (f": {rec.failure}" if rec.failure else ""))
    finally:
        ray.shutdown()
    return state
