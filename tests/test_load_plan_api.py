"""A load run as a library call: a `LoadPlan` built in Python (no argparse) for a small points run, measured through
`evalkit.api.measure` against `evalkit sim`; its summary is the typed load summary, its manifest the one the CLI
writes for the same flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import evalkit.api
from evalkit.load.measure import LoadMeasurement, LoadPlan
from evalkit.load.points import PointsPlan, PointTemplate
from evalkit.load.summary_records import LoadSummaryJson
from evalkit.runs.schemas import LoadSummary
from evalkit.session.context import RunDirOptions
from evalkit.sim.launch import start_sim


def _plan() -> LoadPlan:
    points = PointsPlan(
        mode="concurrency",
        start=2.0,
        template=PointTemplate(arrivals="constant", warmup=2, requests=8),
        prompt_tokens="20",
        output_tokens="40",
        slo=("errors==0",),
        token_scale=1.0,
        timeout_s=60.0,
    )
    return LoadPlan(points, seed=7)


def test_the_plan_is_the_measurement_and_its_manifest() -> None:
    plan = _plan()
    m = LoadMeasurement(plan)
    assert m.kind == "load" and m.scope is None
    assert m.manifest["seed"] == 7
    assert list(m.options)[:4] == ["--seed", "mode", "start_load", "search"]
    assert m.options["slo"] == ["errors==0"] and m.options["prompt_tokens"] == "20"


def test_a_points_plan_runs_through_the_api(tmp_path: Path) -> None:
    with start_sim(["--time-scale", "4", "--max-batch", "8", "--decode-rate", "100"]) as sim:
        result = evalkit.api.measure(_plan(), evalkit.api.target(sim.base_url), RunDirOptions(out=tmp_path, name="x"))
    assert result.exit_code == 0 and result.failure is None
    assert result.path == tmp_path / "x"
    record = result.summary
    assert isinstance(record, LoadSummary) and record.kind == "load"
    summary = cast(LoadSummaryJson, record.to_json())
    assert summary["mode"] == "concurrency" and summary["seed"] == 7
    assert summary["requests"] == 8 and summary["errors"] == 0 and summary["wrong_answers"] == 0
    (point,) = summary["points"]
    assert point["load"] == 2.0 and point["label"] == "c=2" and point["meets_slo"] and point["valid"]
    assert point["metrics"]["requests"] == 8 and point["metrics"]["ttft_s"]["n"] == 8
    assert summary["max_concurrency_meeting_slo"] == 2
    assert [t["slo"] for t in summary["slo"]] == ["errors==0"]
    manifest = json.loads((tmp_path / "x" / "manifest.json").read_text())
    assert manifest["seed"] == 7
    assert manifest["load"] == {
        "mode": "concurrency",
        "start_load": 2.0,
        "search": None,
        "runs": 1,
        "slo": ["errors==0"],
        "arrivals": "constant",
        "requests": 8,
        "duration_s": None,
        "warmup": 2,
        "prompt_tokens": "20",
        "output_tokens": "40",
        "prefix_tokens": 0,
        "timeout_s": 60.0,
        "search_max": None,
        "resolution": 0.1,
        "burstiness": 1.0,
        "burst_size": 1,
        "ramp_up_s": 0.0,
        "stages": None,
        "max_concurrency": None,
        "max_prefill": None,
        "precision": None,
        "reasoning_room": 0,
    }
