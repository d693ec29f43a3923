"""Reading a capability dataset's rows, from the Hugging Face Hub at a pinned revision or a local directory in the
Hub's columns; each eval module (`evals/<name>.py`) names its sources and its question ids."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict, TypeVar, cast

from evalkit.errors import UsageError

RowT = TypeVar("RowT")  # one dataset's row, in its columns (a TypedDict of the eval module)


class SourceRevision(TypedDict, total=False):
    """Where one split's rows came from, as a run's manifest records it: the Hub and its revision, or a local file
    and its sha256 (None when the file is absent)."""

    source: Literal["hub", "local"]
    revision: str | None
    file: str
    sha256: str | None


@dataclass(frozen=True)
class HubSource:
    """Where a dataset split lives on the Hub and in a local directory."""

    hub_id: str
    config: str | None
    split: str
    revision: str | None
    local_file: str


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


def read_local(path: Path) -> list[dict[str, Any]]:
    """The rows of a local JSONL file (gzipped when it ends in `.gz`), in file order."""
    if not path.exists():
        raise UsageError(f"dataset file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_hub(src: HubSource) -> list[dict[str, Any]]:
    """The rows of one Hub split at its pinned revision (`datasets` is imported only here)."""
    try:
        from datasets import load_dataset

        ds = load_dataset(src.hub_id, src.config, split=src.split, revision=src.revision)
    except Exception as e:  # noqa: BLE001 - any failure to fetch is reported as one line
        raise UsageError(
            f"could not load {src.hub_id} ({src.split}) from the Hugging Face Hub: {type(e).__name__}; "
            "pass --data-dir or set EVALKIT_DATA_DIR to a local copy"
        ) from None
    return [dict(r) for r in ds]


def load_sources(
    dataset: str,
    sources: tuple[HubSource, ...],
    qid: Callable[[str, int, RowT], str],
    data_dir: str | Path | None,
) -> list[DatasetItem]:
    """Every row of a dataset's splits, from the local directory when one is given, else the Hub, in row order;
    `qid` reads a row in the dataset's columns."""
    root = data_dir_from_env(data_dir)
    items: list[DatasetItem] = []
    for src in sources:
        rows = read_local(root / src.local_file) if root else read_hub(src)
        items.extend(
            DatasetItem(qid(src.split, i, cast(RowT, r)), dataset, src.split, i, r) for i, r in enumerate(rows)
        )
    return items


def sources_revision(sources: tuple[HubSource, ...], data_dir: str | Path | None) -> dict[str, SourceRevision]:
    """What a run records about where a dataset came from: Hub id and revision, or local file hashes."""
    root = data_dir_from_env(data_dir)
    out: dict[str, SourceRevision] = {}
    for src in sources:
        key = f"{src.hub_id}:{src.split}"
        if root:
            path = root / src.local_file
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
            out[key] = {"source": "local", "file": src.local_file, "sha256": digest}
        else:
            out[key] = {"source": "hub", "revision": src.revision or "main"}
    return out


def load_items(dataset: str, data_dir: str | Path | None = None) -> list[DatasetItem]:
    """Every item of one registered dataset, in its row order."""
    from evalkit_evals.registry import get

    return get(dataset).load(data_dir)


def revision_info(dataset: str, data_dir: str | Path | None = None) -> dict[str, SourceRevision]:
    """Where one registered dataset's rows came from (Hub revision or local file hashes)."""
    from evalkit_evals.registry import get

    return get(dataset).revision(data_dir)
