"""`summary.json` of a load run, computed from the run directory's files alone (manifest, points, requests).

Each load point pools its repeats' measured requests for its figures and is judged on the median over repeats
of each target's figure. The maximum meeting the targets is the largest passing load below the smallest failing
one, so a load that passed by luck above a failure is never reported as the maximum.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from evalkit.client.lag import error_budget
from evalkit.load.client_hosts import hosts_summary
from evalkit.load.metrics import dist, judge_point, point_metrics
from evalkit.load.precision import PrecisionStop
from evalkit.load.records import LoadLine, LoadSettings, PrecisionJson, StageJson, as_json_lines, read_lines
from evalkit.load.slo import Target, parse_target
from evalkit.load.summary_records import (
    ClientBlock,
    LoadSummaryJson,
    PointJson,
    PointMetrics,
    StageFigures,
)
from evalkit.runs.rundir import MANIFEST, REQUESTS, read_json_object, read_jsonl

POINTS = "points.jsonl"


def build_summary(path: Path) -> LoadSummaryJson:
    """The summary of the load run at `path`."""
    manifest = read_json_object(path / MANIFEST)
    opts = cast(LoadSettings, manifest["load"])
    targets: list[Target] = [parse_target(s) for s in opts.get("slo") or []]
    mode = opts["mode"]
    lines = read_lines(path / REQUESTS)
    by_point: dict[int, list[LoadLine]] = {}
    for r in lines:
        if r.get("phase") == "measured":
            by_point.setdefault(int(r["point"]), []).append(r)
    repeats: dict[float, list[PointMetrics]] = {}
    pooled: dict[float, list[LoadLine]] = {}
    stopped: dict[float, list[bool]] = {}
    for p in read_jsonl(path / POINTS):
        measured = by_point.get(int(p["point"]), [])
        load = float(p["load"])
        stopped.setdefault(load, []).append(bool(p.get("stopped_on_precision")))
        repeats.setdefault(load, []).append(point_metrics(measured, mode, load, targets))
        pooled.setdefault(load, []).extend(measured)
    points: list[PointJson] = []
    for load in sorted(repeats):
        judged = judge_point(repeats[load], targets)
        points.append(
            {
                "load": load,
                "label": _label(mode, load),
                "repeats": len(repeats[load]),
                **judged,
                "metrics": point_metrics(pooled[load], mode, load, targets),
                "per_repeat": repeats[load],
                **_precision(opts.get("precision"), repeats[load], by_point_lines(pooled[load]), stopped[load]),
                **_stages(opts.get("stages"), pooled[load], mode, load, targets),
            }
        )
    failing = [p["load"] for p in points if not p["meets_slo"]]
    limit = min(failing) if failing else None
    passing = [p["load"] for p in points if p["meets_slo"] and (limit is None or p["load"] < limit)]
    # No load meeting the targets is a maximum of 0 (a number a gate rule can fail on), not a missing value.
    best = max(passing) if passing else (0.0 if targets and points else None)
    at_best = next((p for p in points if p["load"] == best), None)
    measured_all = [r for r in lines if r.get("phase") == "measured"]
    client: ClientBlock = {
        "send_lateness_s": dist(r.get("send_lateness_s") for r in measured_all),
        **cast(ClientBlock, error_budget(as_json_lines(measured_all))),  # its own error budget (docs/client-timing.md)
        "invalid_points": [
            {"load": p["load"], "reasons": sorted({x for r in p["per_repeat"] for x in r["invalid_reasons"]})}
            for p in points
            if not p["valid"]
        ],
        **hosts_summary(path, measured_all),  # sent from several hosts (load --ray): each one's figures
    }
    summary: LoadSummaryJson = {
        "kind": "load",
        "seed": manifest.get("seed"),
        "mode": mode,
        "arrivals": opts.get("arrivals") if mode == "rate" else None,
        "shaping": {
            "burstiness": opts.get("burstiness"),
            "burst_size": opts.get("burst_size"),
            "ramp_up_s": opts.get("ramp_up_s"),
            "stages": opts.get("stages"),
            "max_concurrency": opts.get("max_concurrency"),
            "max_prefill": opts.get("max_prefill"),
            "precision": opts.get("precision"),
        },
        "search": opts.get("search"),
        "runs_per_point": opts.get("runs", 1),
        "slo": [t.to_json() for t in targets],
        "workload": {
            "prompt_tokens": opts.get("prompt_tokens"),
            "output_tokens": opts.get("output_tokens"),
            "prefix_tokens": opts.get("prefix_tokens"),
            "token_scale": manifest.get("token_scale"),
        },
        "requests": len(measured_all),
        "errors": sum(1 for r in measured_all if r.get("outcome") == "error"),
        "wrong_answers": sum(1 for r in measured_all if r.get("outcome") == "wrong"),
        "points": points,
        "max_load_meeting_slo": best,
        "first_failing_load": limit,
        # False when the largest load tried still met every target: the true maximum may lie above it.
        "bounded": limit is not None,
        "goodput_rps_at_max": at_best["metrics"]["goodput_rps"] if at_best else None,
        "client": client,
    }
    # The gate reads `load.max_concurrency_meeting_slo` or `load.max_rate_meeting_slo`.
    if mode == "concurrency":
        summary["max_concurrency_meeting_slo"] = int(best) if best is not None else best
    else:
        summary["max_rate_meeting_slo"] = best
    return summary


def by_point_lines(lines: list[LoadLine]) -> list[list[LoadLine]]:
    """The pooled lines split back into their repeats (by `point`), in order."""
    out: dict[int, list[LoadLine]] = {}
    for r in lines:
        out.setdefault(int(r["point"]), []).append(r)
    return [out[k] for k in sorted(out)]


def _precision(
    rule: PrecisionJson | None, repeats: list[PointMetrics], lines: list[list[LoadLine]], stopped: list[bool]
) -> PointJson:
    """`precision`: the target, each repeat's measured count, its margin at the end and whether it stopped early."""
    if not rule:
        return {}
    stop = PrecisionStop(rule["target_moe"], rule["metric"], rule["min_requests"], rule["max_requests"])
    return {
        "precision": {
            **rule,
            "per_repeat": [
                {"measured": len(ls), "moe": stop.moe(ls), "stopped_early": st, "reached": stop.reached(ls)}
                for ls, st in zip(lines, stopped)
            ],
            "reached": all(stop.reached(ls) for ls in lines) if lines else False,
        }
    }


def _stages(
    stages: list[StageJson] | None, lines: list[LoadLine], mode: str, load: float, targets: list[Target]
) -> PointJson:
    """`stages`: a multi-stage point's figures per stage (its requests by the stage they were sent in)."""
    if not stages:
        return {}
    out: list[StageFigures] = []
    for i, st in enumerate(stages):
        mine = [r for r in lines if r.get("stage") == i]
        m = point_metrics(mine, mode, st["rate"], targets)
        out.append({**st, "index": i, "requests": len(mine), "metrics": m})
    return {"stages": out}


def _label(mode: str, load: float) -> str:
    return f"c={load:g}" if mode == "concurrency" else f"r={load:g}/s"
