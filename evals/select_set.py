"""The seeded, documented procedure that chose the pinned capability set; run once, its output is committed.

    python -m evalkit_evals.select_set --seed 140 --data-dir ../shared/datasets \
        --out prompts/capability-140-v1.json

Procedure (seed S, one `random.Random(S)` per dataset, datasets in the order below):
- gsm8k: 50 row indices drawn without replacement from the 1319-row test split.
- math500: 30 items stratified by subject and level. Subject quotas are proportional to the subject's share of the
  500 (largest remainder, at least one each); within a subject, items are drawn level by level, cycling through
  levels 1..5 from an offset that advances per subject, so levels are spread evenly overall.
- musr: 20 items over the three splits, 7 / 7 / 6 (murder_mysteries, object_placements, team_allocation).
- humanevalplus: 40 task ids drawn without replacement from the 164.
Ids are stored sorted in dataset order. A different set is a new manifest file with a new name; never edit one.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from evalkit_evals import registry
from evalkit_evals.datasets import DatasetItem, load_items
from evalkit_evals.musr import SPLITS as MUSR_SPLITS
from evalkit_evals.protocol import HubEval
from evalkit_evals.question_set import ManifestDataset, QuestionManifest

COUNTS = {"gsm8k": 50, "math500": 30, "musr": 20, "humanevalplus": 40}
MUSR_QUOTAS = {"murder_mysteries": 7, "object_placements": 7, "team_allocation": 6}


def _hub_eval(dataset: str) -> HubEval[Any]:
    ev = registry.get(dataset)
    assert isinstance(ev, HubEval), dataset  # the pinned set draws from the built-in Hub datasets only
    return ev


def _largest_remainder(sizes: dict[str, int], total: int) -> dict[str, int]:
    n = sum(sizes.values())
    raw = {k: total * v / n for k, v in sizes.items()}
    quota = {k: max(1, int(r)) for k, r in raw.items()}
    for k in sorted(raw, key=lambda k: (raw[k] - int(raw[k]), k), reverse=True):
        if sum(quota.values()) >= total:
            break
        quota[k] += 1
    return quota


def _pick_math(items: list[DatasetItem], rng: random.Random, total: int) -> list[DatasetItem]:
    by_subject: dict[str, list[DatasetItem]] = defaultdict(list)
    for it in items:
        by_subject[it.row["subject"]].append(it)
    quotas = _largest_remainder({s: len(v) for s, v in by_subject.items()}, total)
    chosen: list[DatasetItem] = []
    offset = 0
    for subject in sorted(by_subject):
        strata: dict[int, list[DatasetItem]] = defaultdict(list)
        for it in by_subject[subject]:
            strata[int(it.row["level"])].append(it)
        levels = sorted(strata)
        k = 0
        while quotas[subject] > 0:
            level = levels[(offset + k) % len(levels)]
            k += 1
            pool = [it for it in strata[level] if it not in chosen]
            if pool:
                chosen.append(rng.choice(pool))
                quotas[subject] -= 1
        offset += k
    return chosen


def select(data_dir: str | Path | None, seed: int) -> dict[str, list[str]]:
    """The chosen question ids per dataset for one seed."""
    out: dict[str, list[str]] = {}
    for dataset, count in COUNTS.items():
        rng = random.Random(f"{seed}:{dataset}")
        items = load_items(dataset, data_dir)
        if dataset == "math500":
            chosen = _pick_math(items, rng, count)
        elif dataset == "musr":
            chosen = []
            for split in MUSR_SPLITS:
                pool = [it for it in items if it.split == split]
                chosen.extend(rng.sample(pool, MUSR_QUOTAS[split]))
        else:
            chosen = rng.sample(items, count)
        order = {it.qid: n for n, it in enumerate(items)}
        out[dataset] = sorted((it.qid for it in chosen), key=order.__getitem__)
    return out


def build_manifest(name: str, data_dir: str | Path | None, seed: int) -> QuestionManifest:
    """The manifest: name, seed, procedure, and per dataset its Hub source, revision and chosen ids."""
    ids = select(data_dir, seed)
    datasets: dict[str, ManifestDataset] = {}
    for dataset, qids in ids.items():
        datasets[dataset] = {
            "sources": [
                {"hub_id": s.hub_id, "config": s.config, "split": s.split, "revision": s.revision}
                for s in _hub_eval(dataset).sources
            ],
            "ids": qids,
        }
    datasets["humanevalplus"]["evalplus_data"] = "HumanEvalPlus v0.1.10 (evalplus release asset, sha256 272720b9…f101)"
    return {
        "name": name,
        "seed": seed,
        "procedure": f"python -m evalkit_evals.select_set --seed {seed} (see evals/select_set.py)",
        "counts": COUNTS,
        "datasets": datasets,
    }


def main(argv: list[str] | None = None) -> int:
    """Write the manifest for a seed."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=140)
    p.add_argument("--name", default="capability-140-v1")
    p.add_argument("--data-dir")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    man = build_manifest(a.name, a.data_dir, a.seed)
    a.out.write_text(json.dumps(man, indent=1) + "\n", encoding="utf-8")
    print(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
