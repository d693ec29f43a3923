"""The pinned question set: read a manifest from `evalkit_prompts`, hash it, and pick the items a run asks."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TypedDict

from evalkit.errors import UsageError
from evalkit_evals import registry
from evalkit_evals.datasets import DatasetItem

DEFAULT_MANIFEST = "capability-140-v1"


class SourceJson(TypedDict):
    """A question manifest's record of one Hub split."""

    hub_id: str
    config: str | None
    split: str
    revision: str | None


class _ManifestDataset(TypedDict):
    sources: list[SourceJson]
    ids: list[str]


class ManifestDataset(_ManifestDataset, total=False):
    """A question manifest's entry for one dataset: its Hub sources and chosen ids (HumanEval+: the evalplus data)."""

    evalplus_data: str


class QuestionManifest(TypedDict):
    """A question manifest (`prompts/<name>.json`): name, seed, procedure, counts, and each dataset's entry."""

    name: str
    seed: int
    procedure: str
    counts: dict[str, int]
    datasets: dict[str, ManifestDataset]


@dataclass(frozen=True)
class QuestionSet:
    """A manifest by name, its sha256, and its chosen ids per dataset."""

    name: str
    sha256: str
    ids: dict[str, list[str]]
    raw: QuestionManifest


def load_manifest(name: str = DEFAULT_MANIFEST) -> QuestionSet:
    """A manifest shipped under `prompts/` by name, or a path to a JSON file."""
    path = Path(name)
    blob = path.read_bytes() if path.suffix == ".json" and path.exists() else None
    if blob is None:
        res = files("evalkit_prompts") / f"{name}.json"
        if not res.is_file():
            raise UsageError(f"question manifest not found: {name} (looked in evalkit_prompts/{name}.json)")
        blob = res.read_bytes()
    raw: QuestionManifest = json.loads(blob)
    ids = {d: list(v["ids"]) for d, v in raw["datasets"].items()}
    return QuestionSet(raw["name"], hashlib.sha256(blob).hexdigest(), ids, raw)


def parse_datasets(value: str | None) -> list[str]:
    """`--datasets gsm8k,musr` as a list in registry order (default: the built-ins); unknown names are usage
    errors."""
    if not value:
        return list(registry.BUILTIN)
    known = registry.names()
    asked = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [a for a in asked if a not in known]
    if unknown:
        raise UsageError(f"unknown dataset(s) {', '.join(unknown)} (known: {', '.join(known)})")
    return [d for d in known if d in asked]


def select_items(
    qset: QuestionSet, datasets: list[str], limit: int | None, data_dir: str | Path | None
) -> list[DatasetItem]:
    """The set's items for the datasets asked, the first `limit` of each when given, in manifest order; a dataset
    the manifest does not name (a user eval) is asked whole, in its row order."""
    out: list[DatasetItem] = []
    for dataset in datasets:
        loaded = registry.get(dataset).load(data_dir)
        by_id = {it.qid: it for it in loaded}
        ids = qset.ids[dataset] if dataset in qset.ids else [it.qid for it in loaded]
        if limit is not None:
            ids = ids[:limit]
        missing = [q for q in ids if q not in by_id]
        if missing:
            raise UsageError(f"{dataset}: manifest names {missing[0]} which the loaded data does not hold")
        out.extend(by_id[q] for q in ids)
    return out


def items_by_id(qids: list[str], data_dir: str | Path | None) -> dict[str, DatasetItem]:
    """Any items of the registered datasets by contract id (for replay); unknown ids are simply absent."""
    wanted = {q.split(":", 1)[0] for q in qids}
    out: dict[str, DatasetItem] = {}
    for dataset in registry.names():
        if dataset in wanted:
            out.update({it.qid: it for it in registry.get(dataset).load(data_dir)})
    return out
