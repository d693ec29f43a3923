"""Stress diagnoses are typed records written as JSON once: identifier keys, no private keys, old runs still read."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.evidence.server_evidence import read_evidence
from evalkit.evidence.wait_parts import IN_SLOT_PREFILL, WORDS, read_parts
from evalkit.runs.rundir import read_jsonl
from evalkit_stress.diagnose import diagnose
from evalkit_stress.verdicts import VerdictReading

GPU = Path(__file__).resolve().parents[1] / "results" / "examples" / "gpu-h200"
IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]*$")
RUNS = [
    GPU / "llamacpp" / "np2" / "stress",
    GPU / "llamacpp-issue27" / "np2-lv4" / "stress",
    GPU / "llamacpp-issue27" / "np2-noidle" / "stress",
    GPU / "fastllm" / "stress-54k-mb1",
]


def _keys(x: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(x, dict):
        for k, v in x.items():
            yield path, k
            yield from _keys(v, f"{path}.{k}")
    elif isinstance(x, list):
        for v in x:
            yield from _keys(v, path)


@pytest.mark.parametrize("run", RUNS, ids=lambda p: "/".join(p.parts[-3:]))
def test_diagnoses_keys_are_identifiers(run: Path) -> None:
    summary = json.loads((run / "summary.json").read_text())
    lines = [r for r in read_jsonl(run / "requests.jsonl") if r.get("scenario") != "calibration"]
    d = diagnose(summary["metrics"], lines, read_evidence(run)).to_json()
    # split_evidence counts requests by evidence name (`timings+log`): a name, not a sentence
    bad = [(p, k) for p, k in _keys(d) if not p.startswith(".split_evidence") and not IDENTIFIER.match(k)]
    assert not bad, bad[:5]
    assert not any(k.startswith("_") or k == "engine_stopped" for _, k in _keys(d))


def _parts(d: dict[str, Any]) -> list[dict[str, float]]:
    return [x["figures"].get("wait_parts_s") or {} for x in d["head_of_line_blocking"]["samples"]] + [
        (s.get("next_delay") or {}).get("parts_s") or {} for s in d["cancel_aborts"]["samples"]
    ]


def test_old_runs_keyed_wait_parts_by_their_words_and_still_read() -> None:
    old = json.loads((GPU / "llamacpp-issue27" / "np2-lv4" / "stress" / "summary.json").read_text())["diagnoses"]
    assert any(WORDS[IN_SLOT_PREFILL] in p for p in _parts(old))  # the file as written then
    assert any(IN_SLOT_PREFILL in read_parts(p) for p in _parts(old))
    for summary in GPU.glob("**/summary.json"):
        d = json.loads(summary.read_text()).get("diagnoses")
        if d:
            assert all(IDENTIFIER.match(k) for p in _parts(d) for k in read_parts(p)), summary
    assert read_parts({"in_slot_prefill": 1.0}) == {"in_slot_prefill": 1.0}  # a new run's keys pass as they are


def test_a_verdict_reading_takes_any_run_file() -> None:
    old = json.loads((GPU / "llamacpp" / "np2" / "stress" / "summary.json").read_text())["diagnoses"]
    got = VerdictReading.from_json(old["head_of_line_blocking"])
    assert got is not None and got.verdict == old["head_of_line_blocking"]["verdict"]
    assert VerdictReading.from_json(None) is None and VerdictReading.from_json({"figures": {}}) is None
