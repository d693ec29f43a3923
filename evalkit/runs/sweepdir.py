"""A sweep directory: one run directory per command per point, and the state file that says how each point ended.

Layout: `SWEEP/sweep-state.json` (this module), `SWEEP/sweep.toml` (the sweep file as it was started),
`SWEEP/points/<point>/<run>/` (ordinary run directories) and `SWEEP/points/<point>/server-<n>.log` (the server's
log of each start). The sweep writes the state after every command; report and gate read it back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from evalkit.errors import UsageError
from evalkit.runs.rundir import read_json_object, write_json_atomic

STATE = "sweep-state.json"
POINTS = "points"
# A point's status: not started yet, started and not ended (a killed sweep), every command ran, or it failed
# (did not start, crashed, or a command left no finished run).
PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
POINT_STATUSES = (PENDING, RUNNING, DONE, FAILED)


class CommandJson(TypedDict):
    """A command's entry in the state file (`CommandRecord.to_json`)."""

    name: str
    kind: str
    exit_code: int | None
    failure: str | None


class PointJson(TypedDict):
    """A point's entry in the state file (`PointRecord.to_json`)."""

    name: str
    params: dict[str, str]
    server_command: list[str]
    status: str
    failure: str | None
    log_tail: list[str]
    commands: list[CommandJson]
    started: str | None
    finished: str | None


class InterleaveJson(TypedDict):
    """The state file's `interleave` (`Interleave.to_json`)."""

    rounds: int
    seed: int
    order: list[list[str]]


class _SweepStateFields(TypedDict):
    schema_version: int
    kind: str
    name: str
    baseline: str
    points: list[PointJson]


class SweepStateJson(_SweepStateFields, total=False):
    """`sweep-state.json` as written (`SweepState.to_json`): an interleaved sweep's rounds last."""

    interleave: InterleaveJson


@dataclass
class CommandRecord:
    """One evalkit command run at a point: its run name, kind, exit code and the reason when it left no run."""

    name: str
    kind: str
    exit_code: int | None = None
    failure: str | None = None

    def to_json(self) -> CommandJson:
        """As the state file holds it."""
        return {"name": self.name, "kind": self.kind, "exit_code": self.exit_code, "failure": self.failure}


@dataclass
class PointRecord:
    """One point of the sweep: its parameters, the exact server command, and how it ended."""

    name: str
    params: dict[str, str]
    server_command: list[str] = field(default_factory=list)
    status: str = PENDING
    failure: str | None = None  # one line: why the point failed
    log_tail: list[str] = field(default_factory=list)  # the server's last log lines when it failed
    commands: list[CommandRecord] = field(default_factory=list)
    started: str | None = None
    finished: str | None = None

    def to_json(self) -> PointJson:
        """As the state file holds it."""
        return {
            "name": self.name,
            "params": self.params,
            "server_command": self.server_command,
            "status": self.status,
            "failure": self.failure,
            "log_tail": self.log_tail,
            "commands": [c.to_json() for c in self.commands],
            "started": self.started,
            "finished": self.finished,
        }

    @classmethod
    def from_json(cls, d: PointJson) -> PointRecord:
        """Read back one point of the state file."""
        return cls(
            name=str(d["name"]),
            params={str(k): str(v) for k, v in (d.get("params") or {}).items()},
            server_command=[str(x) for x in d.get("server_command") or []],
            status=str(d.get("status") or PENDING),
            failure=d.get("failure"),
            log_tail=[str(x) for x in d.get("log_tail") or []],
            commands=[
                CommandRecord(str(c["name"]), str(c["kind"]), c.get("exit_code"), c.get("failure"))
                for c in d.get("commands") or []
            ],
            started=d.get("started"),
            finished=d.get("finished"),
        )


@dataclass
class Interleave:
    """An interleaved sweep's rounds: how many, the seed that drew each round's order, and that order (the two
    points, first to last). Round r's runs of a point are `points/POINT/round-RR/RUN/`."""

    rounds: int
    seed: int
    order: list[list[str]]

    def to_json(self) -> InterleaveJson:
        """As the state file holds it."""
        return {"rounds": self.rounds, "seed": self.seed, "order": self.order}

    @classmethod
    def from_json(cls, d: InterleaveJson) -> Interleave:
        """Read back the state file's `interleave`."""
        return cls(int(d["rounds"]), int(d["seed"]), [[str(x) for x in o] for o in d["order"]])


def round_tag(r: int) -> str:
    """Round r's folder in a point's folder (1-based): `round-01`."""
    return f"round-{r:02d}"


@dataclass
class SweepState:
    """The sweep's state file: its name, the baseline point and every point in sweep order; an interleaved sweep's
    rounds."""

    name: str
    baseline: str
    points: list[PointRecord]
    interleave: Interleave | None = None

    def point(self, name: str) -> PointRecord:
        """The point of that name (KeyError when there is none)."""
        for p in self.points:
            if p.name == name:
                return p
        raise KeyError(name)

    def to_json(self) -> SweepStateJson:
        """As the state file holds it."""
        out: SweepStateJson = {
            "schema_version": 1,
            "kind": "sweep",
            "name": self.name,
            "baseline": self.baseline,
            "points": [p.to_json() for p in self.points],
        }
        if self.interleave is not None:
            out["interleave"] = self.interleave.to_json()
        return out


def is_sweep_dir(path: Path) -> bool:
    """Whether `path` is a sweep directory (holds a state file)."""
    return (Path(path) / STATE).is_file()


def point_dir(sweep_dir: Path, point: str) -> Path:
    """Where a point's run directories and server logs go."""
    return Path(sweep_dir) / POINTS / point


def read_state(sweep_dir: Path) -> SweepState:
    """The state file of a sweep directory; a missing or malformed one is a usage error."""
    path = Path(sweep_dir) / STATE
    data = read_json_object(path)
    try:
        points = [PointRecord.from_json(p) for p in data["points"]]
        rounds = Interleave.from_json(data["interleave"]) if data.get("interleave") is not None else None
        return SweepState(str(data["name"]), str(data["baseline"]), points, rounds)
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"{path}: not a sweep state file ({type(e).__name__}: {e})") from None


def write_state(sweep_dir: Path, state: SweepState) -> None:
    """Write the state file atomically (a reader never sees half of it)."""
    write_json_atomic(Path(sweep_dir) / STATE, state.to_json())


def finished_runs(sweep_dir: Path, point: PointRecord, prefix: str = "") -> list[Path]:
    """The point's run directories that hold a summary, in command order (those whose command name starts with
    `prefix`: one round's)."""
    out = []
    for c in point.commands:
        p = point_dir(sweep_dir, point.name) / c.name
        if c.name.startswith(prefix) and (p / "summary.json").is_file() and (p / "manifest.json").is_file():
            out.append(p)
    return out


def round_runs(sweep_dir: Path, point: PointRecord, r: int) -> list[Path]:
    """An interleaved point's run directories of round r (1-based) that hold a summary, in command order."""
    return finished_runs(sweep_dir, point, round_tag(r) + "/")


def dumps(state: SweepState) -> str:
    """The state as indented JSON (for `--dry-run` and tests)."""
    return json.dumps(state.to_json(), indent=2)
