"""The sweep file (TOML): the server's command template, its parameters as a grid and/or named points, the evalkit
commands to run at each point, and what to reset between them. Validated like every evalkit file: a misspelt key
or a bad value is one line naming it (exit 2)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from evalkit.config.argtypes import MAX_TIMEOUT_S
from evalkit.config.profiles import read_toml
from evalkit.runs.schemas import ClosedModel, validate

Scalar = str | int | float | bool
COMMANDS = ("bench", "stress", "capability", "load")  # the commands that record server evidence
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=+-]{0,63}$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Placeholders the sweep fills itself; parameters and vars may not take these names.
BUILTINS = ("port", "point", "point_dir", "sweep_dir", "python")


class ServerSpec(ClosedModel):
    """`[server]`: how to start the server at one point and how to know it is up."""

    command: str | list[str]  # a string is split as a shell would (shlex) after the placeholders are filled
    base_url: str = "http://127.0.0.1:{port}/v1"
    health: str = "/health"  # GET on the base URL's root; 200 means up
    # finite and at most a day (docs/conventions.md, "Bounds"): an endless wait is no time limit
    start_timeout_s: float = Field(default=120.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    stop_timeout_s: float = Field(default=15.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    env: dict[str, str] = {}
    cwd: str | None = None  # relative to the sweep file's folder
    log: str | None = None  # a log file the server writes itself (default: its stdout and stderr)

    @field_validator("command")
    @classmethod
    def _non_empty(cls, v: str | list[str]) -> str | list[str]:
        if not v or (isinstance(v, list) and not any(v)):
            raise ValueError("must name a program")
        return v


class ResetCall(ClosedModel):
    """One HTTP call that clears the server's caches (llama.cpp slot erase, vLLM/SGLang prefix-cache reset)."""

    method: Literal["GET", "POST"] = "POST"
    path: str  # on the base URL's root, e.g. "/slots/0?action=erase" or "/reset_prefix_cache"
    body: str | None = None  # JSON text sent as the body (default: none)


class ResetSpec(ClosedModel):
    """`[reset]`: what happens between two commands at one point."""

    between: Literal["restart", "http", "none"] = "restart"
    calls: list[ResetCall] = []

    @model_validator(mode="after")
    def _calls_for_http(self) -> ResetSpec:
        if self.between == "http" and not self.calls:
            raise ValueError('between = "http" needs at least one [[reset.calls]] table')
        return self


class NamedPoint(ClosedModel):
    """One `[[point]]`: a name and parameters that go together (e.g. `np` with its context)."""

    name: str
    params: dict[str, Scalar] = {}
    # `sweep --ray`: the Ray resources this point's task needs (a host label such as {gpu_2080ti = 2}); default the
    # file's top-level `resources`
    resources: dict[str, float] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("must be letters, digits and . _ = + - (at most 64), starting with a letter or digit")
        return v


class RunSpec(ClosedModel):
    """One `[[run]]`: an evalkit command run at every point, with its own options."""

    command: Literal[COMMANDS]  # type: ignore[valid-type]  # Literal over a tuple constant: pydantic reads it
    name: str | None = None  # the run directory's name in the point's folder (default: the command)
    args: list[str] = []

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not _NAME.match(v):
            raise ValueError("must be letters, digits and . _ = + - (at most 64)")
        return v


class InterleaveSpec(ClosedModel):
    """`[interleave]`: two points (two builds) measured in alternating rounds, each round's order drawn from a seeded
    generator, and compared round by round (docs/sweep.md, "Interleaving two builds")."""

    rounds: int = Field(default=6, ge=1, le=1000)  # the paired test needs 6 rounds to reach the 0.05 level
    seed: int = 0


class SweepFile(ClosedModel):
    """The whole sweep file."""

    name: str | None = None
    description: str | None = None
    baseline: str | None = None  # the point the others are compared against (default: the first)
    vars: dict[str, Scalar] = {}  # constants for the templates, overridable with `--set KEY=VALUE`
    resources: dict[str, float] = {}  # `sweep --ray`: the Ray resources each point's task needs (docs/cluster.md)
    server: ServerSpec
    reset: ResetSpec = ResetSpec()
    grid: dict[str, list[Scalar]] = {}
    point: list[NamedPoint] = []
    run: list[RunSpec] = Field(min_length=1)
    interleave: InterleaveSpec | None = None  # alternate the sweep's two points round by round

    @field_validator("grid")
    @classmethod
    def _grid(cls, v: dict[str, list[Scalar]]) -> dict[str, list[Scalar]]:
        for key, values in v.items():
            if not _KEY.match(key) or key in BUILTINS:
                raise ValueError(f"{key!r}: a parameter name is an identifier and not one of {', '.join(BUILTINS)}")
            if not values:
                raise ValueError(f"{key!r} has no values")
        return v

    @model_validator(mode="after")
    def _names(self) -> SweepFile:
        names = [p.name for p in self.point]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"point name(s) given twice: {', '.join(twice)}")
        runs = [r.name or r.command for r in self.run]
        twice = sorted({n for n in runs if runs.count(n) > 1})
        if twice:
            raise ValueError(f"run name(s) given twice (give each [[run]] its own name): {', '.join(twice)}")
        for key in [*self.vars, *(k for p in self.point for k in p.params)]:
            if not _KEY.match(key) or key in BUILTINS:
                raise ValueError(f"{key!r}: a parameter name is an identifier and not one of {', '.join(BUILTINS)}")
        return self


def load_sweep_file(path: Path) -> SweepFile:
    """Read and validate a sweep file; any problem is a usage error naming the file and key."""
    model = validate(SweepFile, read_toml(path), path)
    assert isinstance(model, SweepFile)
    return model
