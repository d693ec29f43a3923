"""Loading the four capability datasets, from the Hugging Face Hub or a local directory in the Hub's columns.

Question ids follow the contract: `gsm8k:<row index>`, `math500:<unique_id>`, `musr:<split>/<row index>`,
`humanevalplus:<task_id>`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import UsageError

DATASETS = ("gsm8k", "math500", "musr", "humanevalplus")
MUSR_SPLITS = ("murder_mysteries", "object_placements", "team_allocation")


@dataclass(frozen=True)
class HubSource:
    """Where a dataset split lives on the Hub and in a local directory."""

    hub_id: str
    config: str | None
    split: str
    revision: str | None
    local_file: str


SOURCES: dict[str, list[HubSource]] = {
    "gsm8k": [HubSource("openai/gsm8k", "main", "test", "cc7b047b6e5bb11b4f1af84efc572db110a51b3c", "openai__gsm8k/test.jsonl")],
    "math500": [HubSource("HuggingFaceH4/MATH-500", None, "test", "6e4ed1a2a79af7d8630a6b768ec859cb5af4d3be",
                          "HuggingFaceH4__MATH-500/test.jsonl")],
    "musr": [HubSource("TAUR-Lab/MuSR", None, s, "7c365b439a222150f317764d4f16ae6c96d7d94a",
                       f"TAUR-Lab__MuSR/{s}.jsonl") for s in MUSR_SPLITS],
    "humanevalplus": [HubSource("evalplus/humanevalplus", None, "test", None,
                                "evalplus__humanevalplus/test.jsonl.gz")],
}


@dataclass(frozen=True)
class DatasetItem:
    """One question: its contract id, dataset, split and the raw row in the Hub's columns."""

    qid: str
    dataset: str
    split: str
    index: int
    row: dict[str, Any]

    @property
    def row_hash(self) -> str:
        """sha256 of the row's canonical JSON: proves which text was asked."""
        blob = json.dumps(self.row, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def data_dir_from_env(data_dir: str | Path | None) -> Path | None:
    """`--data-dir`, else `$EVALKIT_DATA_DIR`, else None (load from the Hub)."""
    value = data_dir or os.environ.get("EVALKIT_DATA_DIR")
    return Path(value) if value else None


def _read_local(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise UsageError(f"dataset file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _read_hub(src: HubSource) -> list[dict[str, Any]]:
    try:
        from datasets import load_dataset

        ds = load_dataset(src.hub_id, src.config, split=src.split, revision=src.revision)
    except Exception as e:  # noqa: BLE001 - any failure to fetch is reported as one line
        raise UsageError(
            f"could not load {src.hub_id} ({src.split}) from the Hugging Face Hub: {type(e).__name__}; "
            "pass --data-dir or set EVALKIT_DATA_DIR to a local copy"
        ) from None
    return [dict(r) for r in ds]


def _qid(dataset: str, split: str, index: int, row: dict[str, Any]) -> str:
    if dataset == "gsm8k":
        return f"gsm8k:{index}"
    if dataset == "math500":
        return f"math500:{row['unique_id']}"
    if dataset == "musr":
        return f"musr:{split}/{index}"
    return f"humanevalplus:{row['task_id']}"


def load_items(dataset: str, data_dir: str | Path | None = None) -> list[DatasetItem]:
    """Every item of one dataset, in the Hub's row order."""
    if dataset not in SOURCES:
        raise UsageError(f"unknown dataset {dataset!r} (known: {', '.join(DATASETS)})")
    root = data_dir_from_env(data_dir)
    items: list[DatasetItem] = []
    for src in SOURCES[dataset]:
        rows = _read_local(root / src.local_file) if root else _read_hub(src)
        items.extend(DatasetItem(_qid(dataset, src.split, i, r), dataset, src.split, i, r) for i, r in enumerate(rows))
    return items


def revision_info(dataset: str, data_dir: str | Path | None = None) -> dict[str, Any]:
    """What a run records about where a dataset came from: Hub id and revision, or local file hashes."""
    root = data_dir_from_env(data_dir)
    out: dict[str, Any] = {}
    for src in SOURCES[dataset]:
        key = f"{src.hub_id}:{src.split}"
        if root:
            path = root / src.local_file
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
            out[key] = {"source": "local", "file": src.local_file, "sha256": digest}
        else:
            out[key] = {"source": "hub", "revision": src.revision or "main"}
    return out
