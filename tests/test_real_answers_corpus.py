"""The real-answer corpus (tests/data/real_answers/, issue #55) is well-formed: every line names a question that
exists, carries the fields the benchmark reads, and sits in the split its hash says. No grading is asserted here:
the grader is measured against the corpus by benchmarks/bench_real_answers.py."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from evalkit_evals.datasets import load_items

CORPUS = Path(__file__).resolve().parent / "data" / "real_answers"
FIELDS = {
    "id": str,
    "content": str,
    "model": str,
    "family": str,
    "thinking": bool,
    "source": str,
    "sample": int,
    "adjudicated": bool,
    "reviewed": bool,
    "split": str,
    "stratum": str,
    "note": str,
}


def corpus_lines() -> list[tuple[str, int, dict]]:
    out = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            out.append((path.name, n, json.loads(line)))
    return out


def expected_split(row: dict) -> str:
    key = f"{row['source']}\x1f{row['id']}\x1f{row['model']}\x1f{row['sample']}".encode()
    return "heldout" if int(hashlib.sha256(key).hexdigest()[:8], 16) % 5 == 0 else "dev"


def test_every_line_has_the_fields_and_types() -> None:
    lines = corpus_lines()
    assert lines, "no corpus files"
    for name, n, row in lines:
        for field, kind in FIELDS.items():
            assert isinstance(row.get(field), kind), f"{name}:{n} {field}={row.get(field)!r}"
        assert row["reasoning"] is None, f"{name}:{n}"
        assert row["source_grade"] in (True, False, None), f"{name}:{n}"
        assert row["split"] in ("dev", "heldout"), f"{name}:{n}"
        assert row["content"].strip() or row["adjudicated"] is False, f"{name}:{n}: empty answer graded right"
        if row["reviewed"]:
            assert row["note"], f"{name}:{n}: a hand-reviewed line says why"


def test_ids_exist_in_the_datasets(data_dir: Path) -> None:
    if not data_dir.is_dir():
        pytest.skip(f"datasets not found at {data_dir}")
    known: dict[str, set[str]] = {}
    for name, n, row in corpus_lines():
        dataset = row["id"].split(":", 1)[0]
        if dataset not in known:
            known[dataset] = {it.qid for it in load_items(dataset, data_dir)}
        assert row["id"] in known[dataset], f"{name}:{n}: {row['id']} is no question of {dataset}"


def test_splits_follow_the_hash_and_hold_out_about_a_fifth() -> None:
    lines = corpus_lines()
    for name, n, row in lines:
        assert row["split"] == expected_split(row), f"{name}:{n}"
    held = sum(row["split"] == "heldout" for _, _, row in lines)
    assert 0.15 <= held / len(lines) <= 0.25


def test_size_families_and_datasets() -> None:
    lines = [row for _, _, row in corpus_lines()]
    assert len(lines) >= 1000
    families = Counter(row["family"] for row in lines)
    assert len(families) >= 4, families
    datasets = Counter(row["id"].split(":", 1)[0] for row in lines)
    assert {"gsm8k", "math500", "humanevalplus"} <= set(datasets), datasets
    assert any(row["thinking"] for row in lines) and not all(row["thinking"] for row in lines)


def test_no_line_is_repeated() -> None:
    keys = Counter((row["source"], row["id"], row["model"], row["sample"]) for _, _, row in corpus_lines())
    assert [k for k, c in keys.items() if c > 1] == []


def test_sources_md_names_every_source() -> None:
    text = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    for source in {row["source"] for _, _, row in corpus_lines()}:
        assert re.search(rf"`{re.escape(source)}`", text), source
