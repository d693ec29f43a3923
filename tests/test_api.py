"""evalkit as a library: each measurement's plan built in Python (no flags, no argparse) and run through
`evalkit.api.run` against `evalkit sim` over HTTP; the summary comes back as its kind's record, and the run directory
is the one the CLI writes (a complete run of the same plan started again measures nothing)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from evalkit.api import BenchPlan, CapabilityPlan, StressPlan, measure, measurement_of, run, target
from evalkit.bench.throughput import packaged_prompts
from evalkit.runs.schemas import BenchSummary, CapabilitySummary, StressSummary
from evalkit.session.context import RunDirOptions
from evalkit.sim.launch import SimProcess


def test_bench_plan_runs_and_a_finished_run_is_returned_as_it_is(
    sim: Callable[..., SimProcess], tmp_path: Path
) -> None:
    server = sim("--time-scale", "20", "--decode-rate", "100")
    plan = BenchPlan(prompts=tuple(packaged_prompts()[:1]), runs=2, max_tokens=32, concurrency=2, warmup=0)
    summary = run(plan, target(server.base_url), out=tmp_path, name="b")
    assert isinstance(summary, BenchSummary)
    assert list(summary.prompts) == ["code"] and len(summary.prompts["code"].runs) == 2
    assert summary.concurrent is not None and summary.concurrent.streams == 2
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["kind"] == "bench" and manifest["bench"]["runs"] == 2
    again = measure(plan, target(server.base_url), RunDirOptions(out=tmp_path, name="b"))
    assert again.again and again.exit_code == 0


def test_stress_plan_runs_its_seeded_cycles(sim: Callable[..., SimProcess], tmp_path: Path) -> None:
    server = sim("--profile", "dual-2080ti-after", "--time-scale", "20")
    plan = StressPlan(seed=3, cycles=1, long_tokens=2000, gen_tokens=32, time_scale=20.0, progress=False)
    summary = run(plan, target(server.base_url), out=tmp_path, name="s")
    assert isinstance(summary, StressSummary)
    assert (summary.seed, summary.cycles, summary.errors, summary.wrong_answers) == (3, 1, 0, 0)
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["stress"] == dict(measurement_of(plan).manifest["stress"])


def test_capability_plan_grades_the_questions_asked(sim: Callable[..., SimProcess], tmp_path: Path) -> None:
    data_dir = os.environ.get("EVALKIT_DATA_DIR")
    if not data_dir:
        pytest.skip("EVALKIT_DATA_DIR names the datasets")
    server = sim("--time-scale", "50", "--accuracy", "1.0")
    plan = CapabilityPlan(thinking="off", datasets=("gsm8k",), limit=3, data_dir=data_dir)
    summary = run(plan, target(server.base_url), out=tmp_path, name="c")
    assert isinstance(summary, CapabilitySummary)
    assert summary.total.total == 3 and summary.scores["gsm8k"].correct == 3


def test_what_is_not_a_plan_is_refused() -> None:
    with pytest.raises(TypeError, match="not a plan"):
        measurement_of("bench")  # type: ignore[arg-type]
