"""Contract-shaped run directories (manifest.json, summary.json, requests.jsonl, graded.jsonl) for report and gate
tests, built from numbers the test chooses, as capability / stress / bench runs would write them."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

DATASETS = {"gsm8k": 50, "math500": 30, "musr": 20, "humanevalplus": 40}


def bench_args(base_url: str, out: Path | str, name: str, *flags: str) -> list[str]:
    """`evalkit bench` argv against `base_url`, writing the run `name` under `out`, then the test's own flags."""
    return ["bench", "--base-url", base_url, "--out", str(out), "--name", name, *flags]


def write_run(
    path: Path,
    kind: str,
    summary: dict[str, Any],
    label: str | None = None,
    requests: list[dict[str, Any]] | None = None,
    graded: list[dict[str, Any]] | None = None,
) -> Path:
    """One finished run directory."""
    path.mkdir(parents=True, exist_ok=True)
    manifest = {
        "kind": kind,
        "evalkit_version": "0.1.0",
        "started": "2026-10-01T10:00:00+00:00",
        "finished": "2026-10-01T10:30:00+00:00",
        "command": ["evalkit", kind],
        "model": "m",
        "build_label": label or path.name,
    }
    (path / "manifest.json").write_text(json.dumps(manifest))
    (path / "summary.json").write_text(json.dumps({"kind": kind, **summary}))
    for name, lines in (("requests.jsonl", requests), ("graded.jsonl", graded)):
        if lines is not None:
            (path / name).write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def bench_run(
    path: Path,
    label: str,
    rates: dict[str, float],
    combined: float | None = None,
    jitter: float = 0.005,
    seed: int = 0,
    n: int = 3,
) -> Path:
    """A bench run whose per-run decode rates wander by `jitter` (relative) around each prompt's rate."""
    rng = random.Random(seed)
    prompts = {}
    for name, rate in rates.items():
        runs = [round(rate * (1 + rng.uniform(-jitter, jitter)), 3) for _ in range(n)]
        req = [round(r * 0.93, 3) for r in runs]
        prompts[name] = {
            "tok_s": statistics.median(runs),
            "runs": runs,
            "request_tok_s": statistics.median(req),
            "request_runs": req,
        }
    summary: dict[str, Any] = {"prompts": prompts, "concurrent": None}
    if combined is not None:
        runs = [round(combined * (1 + rng.uniform(-jitter, jitter)), 3) for _ in range(n)]
        summary["concurrent"] = {
            "streams": 2,
            "combined_tok_s": statistics.median(runs),
            "runs": runs,
            "per_stream_tok_s": [round(combined / 2, 3)] * 2,
        }
    return write_run(path, "bench", summary, label)


def capability_run(path: Path, label: str, wrong: set[str], thinking: str = "off") -> Path:
    """A capability run of the 140-question shape where exactly the ids in `wrong` were answered wrong."""
    graded, scores = [], {}
    for ds, n in DATASETS.items():
        ok = 0
        for i in range(n):
            qid = f"{ds}:{i}"
            correct = qid not in wrong
            ok += correct
            graded.append(
                {"id": qid, "correct": correct, "outcome": "correct" if correct else "wrong", "extracted": "x"}
            )
        scores[ds] = {"correct": ok, "total": n}
    total = {"correct": sum(s["correct"] for s in scores.values()), "total": sum(DATASETS.values())}
    return write_run(path, "capability", {"thinking": thinking, "scores": scores, "total": total}, label, graded=graded)


def stress_run(path: Path, label: str, insert_ttft: float, cycles: int = 3, seed: int = 0) -> Path:
    """A stress run whose short inserts wait about `insert_ttft` s behind a 40 s long prefill each cycle."""
    rng = random.Random(seed)
    lines, t, ins = [], 1_760_000_000.0, []
    for c in range(cycles):
        long_start = t
        lines.append(
            {
                "request_id": f"{label}-c{c}-alone",
                "t_sent": t - 50,
                "t_first_token": t - 10.0,
                "t_done": t - 9.0,
                "ttft_s": 40.0,
                "status": "ok",
                "cycle": c,
                "scenario": "long_alone",
                "role": "long",
                "prompt_tokens": 54000,
                "completion_tokens": 8,
                "error": None,
            }
        )
        lines.append(
            {
                "request_id": f"{label}-c{c}-long",
                "t_sent": t,
                "t_first_token": t + 40.0,
                "t_done": t + 41.0,
                "ttft_s": 40.0,
                "status": "ok",
                "cycle": c,
                "scenario": "short_insert",
                "role": "long",
                "prompt_tokens": 54000,
                "completion_tokens": 8,
                "error": None,
            }
        )
        for k in range(2):
            sent = long_start + 1.0 + k * 0.2
            ttft = insert_ttft * (1 + rng.uniform(-0.03, 0.03))
            ins.append(ttft)
            lines.append(
                {
                    "request_id": f"{label}-c{c}-s{k}",
                    "t_sent": sent,
                    "t_first_token": sent + ttft,
                    "t_done": sent + ttft + 0.4,
                    "ttft_s": ttft,
                    "status": "ok",
                    "cycle": c,
                    "scenario": "short_insert",
                    "role": "short",
                    "prompt_tokens": 30,
                    "completion_tokens": 4,
                    "error": None,
                }
            )
        t += 120.0
    ins.sort()
    dist = {"p50": statistics.median(ins), "p95": ins[-1] - 0.001, "max": ins[-1], "n": len(ins)}
    summary = {
        "seed": 42,
        "cycles": cycles,
        "requests": len(lines),
        "errors": 0,
        "wrong_answers": 0,
        "metrics": {
            "short_insert_ttft_s": dist,
            "long_prefill_s": {"p50": 40.0, "p95": 40.0, "max": 40.0, "n": cycles},
        },
    }
    return write_run(path, "stress", summary, label, requests=lines)
