"""What one stress run is: a frozen, typed plan the CLI builds from its flags (or a library caller builds itself).

The seeded schedule, the manifest's `stress` settings, the resume fields and how the schedule is sent are all read
off the plan's fields here, in one place; `evalkit_stress.measure.StressMeasurement(plan)` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from evalkit_stress.runner import RunOptions
from evalkit_stress.scenario_file import ScenarioFile, builtin_scenarios
from evalkit_stress.schedule import Schedule, build_schedule
from evalkit_stress.until_sure import SureRule


class StressSettings(TypedDict):
    """The manifest's `stress` block: the options a resume must match, in the order they are written."""

    prompt_salt: str
    long_tokens: int
    time_scale: float
    shuffle: bool
    reuse_long_prompt: bool
    short_max_tokens: int
    long_max_tokens: int
    gen_tokens: int
    timeout_s: float
    max_minutes: float | None
    scenario_file: str
    scenario_sha256: str
    scenario_builtin: bool


@dataclass(frozen=True)
class StressPlan:
    """One stress run: `cycles` seeded cycles (seed `seed`) of the scenario file `source`, and how they are sent.

    `prompt_salt` goes first in every long prompt (the CLI picks it from the run directory's path; "" with
    --reuse-prompts). `until_sure`: stop after the cycle that decides every verdict and figure (`cycles` is then the
    most); `baseline`: a finished stress run to decide comparisons against."""

    seed: int = 42
    cycles: int = 18
    source: ScenarioFile = field(default_factory=builtin_scenarios)
    long_tokens: int = 54_000
    time_scale: float = 1.0
    shuffle: bool = False
    reuse_long_prompt: bool = False
    short_max_tokens: int = 64
    long_max_tokens: int = 64
    gen_tokens: int = 512
    timeout_s: float = 900.0
    max_minutes: float | None = None
    prompt_salt: str = ""
    ignore_eos: bool = True
    gpu_interval_s: float = 1.0
    progress: bool = True  # tqdm's bar on a terminal
    log_steps: bool = False  # a timed line per cycle (a log, not a terminal)
    until_sure: SureRule | None = None
    baseline: Path | None = None  # resolved; its counted request lines are read when the run starts

    def settings(self) -> StressSettings:
        """The manifest's `stress` block (what a resume must match)."""
        return StressSettings(
            prompt_salt=self.prompt_salt,
            long_tokens=self.long_tokens,
            time_scale=self.time_scale,
            shuffle=self.shuffle,
            reuse_long_prompt=self.reuse_long_prompt,
            short_max_tokens=self.short_max_tokens,
            long_max_tokens=self.long_max_tokens,
            gen_tokens=self.gen_tokens,
            timeout_s=self.timeout_s,
            max_minutes=self.max_minutes,
            scenario_file=self.source.label,
            scenario_sha256=self.source.sha256,
            scenario_builtin=self.source.builtin,
        )

    def schedule(self) -> Schedule:
        """The seeded schedule of every cycle."""
        return build_schedule(
            self.seed,
            self.cycles,
            self.long_tokens,
            self.shuffle,
            self.reuse_long_prompt,
            self.gen_tokens,
            self.source,
            self.prompt_salt,
        )

    def send(self) -> RunOptions:
        """How the schedule is sent (the length forcing is chosen later, against the server's preflight)."""
        return RunOptions(
            time_scale=self.time_scale,
            short_max_tokens=self.short_max_tokens,
            long_max_tokens=self.long_max_tokens,
            gen_tokens=self.gen_tokens,
            timeout_s=self.timeout_s,
            gpu_interval_s=self.gpu_interval_s,
            progress=self.progress,
            log_steps=self.log_steps,
        )
