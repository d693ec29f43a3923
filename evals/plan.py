"""What one live capability run is: a frozen, typed plan the CLI builds from its flags (or a library caller builds),
and the measurement made from it: the questions loaded and selected, the code judge, the dataset revisions, and the
run's manifest fields and resume options read off the plan's fields.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.errors import UsageError
from evalkit_evals.datasets import SourceRevision
from evalkit_evals.isolation import IsolationJson
from evalkit_evals.measure import CapabilityMeasurement, UnderLoad
from evalkit_evals.model_judge import JudgeSettings
from evalkit_evals.question_set import DEFAULT_MANIFEST, load_manifest, parse_datasets, select_items
from evalkit_evals.repeats_auto import DEFAULT_MARGIN, RepeatsRule, smallest_reachable, unreachable
from evalkit_evals.runner import Sampling

if TYPE_CHECKING:
    from evalkit_evals.code_judge import CodeJudge

# Room for the answer alone, or for reasoning and the answer; a truncated answer is counted, never hidden.
DEFAULT_MAX_TOKENS = {"off": 4096, "low": 8192, "medium": 16384, "high": 32768}


@dataclass(frozen=True)
class CapabilityPlan:
    """One live capability run: the question set (`question_set`: the pinned one by default) cut to `datasets` and
    `limit`, asked at `thinking`, `repeats` times (or until sure: `repeats_auto`, `repeats` then its most rounds).

    `user_evals`: `--eval FILE`s (their names join `datasets`); `judge`: a model judge or extractor; `under_load`:
    the idle and loaded passes of a background load (built above the measurements, `evalkit.under_load`),
    with `under_load_spec` what the manifest records of that load. `margin_given`: whether `repeats_auto`'s margin
    was asked for (a default out of reach is widened, an asked one refused)."""

    thinking: str
    datasets: tuple[str, ...] = ()
    user_evals: tuple[Path, ...] = ()
    limit: int | None = None
    question_set: str = DEFAULT_MANIFEST  # a manifest under prompts/ by name, or a JSON file's path
    data_dir: str | None = None
    max_tokens: int | None = None  # None: DEFAULT_MAX_TOKENS of `thinking`
    repeats: int = 1
    repeats_auto: RepeatsRule | None = None
    margin_given: bool = False
    temperature: float | None = None  # None: 0.7 with repeats, else 0
    timeout_s: float = 600.0
    concurrency: int | None = None
    unsafe_exec: bool = False
    judge: JudgeSettings | None = None
    under_load: UnderLoad | None = None
    under_load_spec: dict[str, str | int | float | None] | None = None


def user_evals(paths: tuple[Path, ...]) -> tuple[list[str], dict[str, dict[str, str]]]:
    """Register each `--eval FILE` for this run; their names, and what the manifest records of them."""
    from evalkit_evals import registry
    from evalkit_evals.user_eval import load_user_eval

    names: list[str] = []
    info: dict[str, dict[str, str]] = {}
    for path in paths:
        ev = load_user_eval(path)
        if ev.name in info:
            raise UsageError(f"two --eval files name the eval {ev.name!r} ({info[ev.name]['file']}, {path})")
        registry.register(ev)
        names.append(ev.name)
        info[ev.name] = {"file": str(path), "sha256": ev.sha256}
    return names, info


def code_judge(datasets: list[str], unsafe_exec: bool) -> tuple[CodeJudge | None, IsolationJson]:
    """The sandbox for HumanEval+ (exit 2 when bubblewrap is missing, unless --unsafe-exec) and what the manifest
    records of it; (None, ...) when no model-written code will run."""
    from evalkit_evals import registry

    if not any(registry.get(ds).runs_code for ds in datasets):
        return None, {"tool": None, "note": "no HumanEval+ item: no model-written code runs"}
    from evalkit_evals.code_judge import CodeJudge
    from evalkit_evals.isolation import choose_isolation

    isolation = choose_isolation(unsafe_exec)
    if not isolation.isolated:
        sys.stderr.write("warning: --unsafe-exec: HumanEval+ code runs without bubblewrap, with resource limits only\n")
    return CodeJudge(isolation), isolation.manifest()


def revisions(datasets: list[str], data_dir: str | None) -> tuple[dict[str, dict[str, SourceRevision]], dict[str, str]]:
    """Each dataset's revision as the manifest records it, and the short form each graded line carries."""
    from evalkit_evals.datasets import revision_info

    full = {ds: revision_info(ds, data_dir) for ds in datasets}
    short = {}
    for ds, info in full.items():
        parts = [v.get("revision") or f"local sha256:{(v.get('sha256') or 'missing')[:16]}" for v in info.values()]
        short[ds] = ",".join(dict.fromkeys(parts))
    return full, short


def reachable_rule(rule: RepeatsRule, sizes: dict[str, int], margin_given: bool) -> RepeatsRule:
    """`--repeats auto`'s rule for these datasets: a default margin no run of them could reach is widened to the
    smallest every one of them reaches in the most rounds (said in a note); an asked one is refused."""
    refused = unreachable(rule, sizes)  # said before any round
    if refused is None:
        return rule
    if margin_given:
        raise UsageError(refused)
    reach = max(smallest_reachable(q, rule.max_repeats) for q in sizes.values() if q > 0)
    wider = replace(rule, margin=math.ceil(reach * 100) / 100)
    print(
        f"note: --repeats auto: the default margin ±{DEFAULT_MARGIN:g} cannot be reached for every dataset "
        f"in {wider.max_repeats} rounds; deciding at ±{wider.margin:g} (--margin and --max-repeats choose)",
        file=sys.stderr,
        flush=True,
    )
    return wider


def capability_measurement(plan: CapabilityPlan) -> CapabilityMeasurement:
    """The live run of `plan`: user evals registered, the question set loaded and cut, the code judge chosen, the
    revisions read; its manifest fields, the options a resume must match and its scope (what is asked)."""
    from evalkit_evals.prompting import template_hashes

    user_names, user = user_evals(plan.user_evals)
    datasets = parse_datasets(",".join(plan.datasets)) if plan.datasets or not user_names else []
    datasets += [n for n in user_names if n not in datasets]
    qset = load_manifest(plan.question_set)
    items = select_items(qset, datasets, plan.limit, plan.data_dir)
    judge_code, isolation = code_judge(sorted({it.dataset for it in items}), plan.unsafe_exec)
    full, short = revisions(datasets, plan.data_dir)
    max_tokens = plan.max_tokens or DEFAULT_MAX_TOKENS[plan.thinking]
    auto = plan.repeats_auto
    if auto is not None:
        sizes: dict[str, int] = {}
        for it in items:
            sizes[it.dataset] = sizes.get(it.dataset, 0) + 1
        auto = reachable_rule(auto, sizes, plan.margin_given)
    if plan.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    temperature = plan.temperature if plan.temperature is not None else (0.7 if plan.repeats > 1 else 0.0)
    judge = plan.judge.manifest() if plan.judge is not None else None
    manifest = {
        "mode": "live",
        "question_set": {"name": qset.name, "sha256": qset.sha256},
        "dataset_revisions": full,
        "seed": qset.raw.get("seed"),
        "thinking": plan.thinking,
        "datasets": datasets,
        "limit": plan.limit,
        "max_tokens": max_tokens,
        "repeats": plan.repeats,
        **({"repeats_auto": auto.to_json()} if auto is not None else {}),
        "temperature": temperature,
        "prompt_templates": template_hashes(datasets),
        "code_isolation": isolation,
        **({"user_evals": user} if user else {}),
        **({"under_load": plan.under_load_spec} if plan.under_load_spec is not None else {}),
        **({"judge": judge} if judge is not None else {}),
    }
    # Which questions are asked (--datasets, --limit) is no condition of the measurement: a resume with a larger
    # limit asks the new ones alike, and the summary counts the questions asked for. Each dataset's revision is.
    options = {
        "--thinking": plan.thinking,
        "--repeats": "auto" if auto is not None else plan.repeats,
        **({"--repeats auto": auto.to_json()} if auto is not None else {}),
        "--max-tokens": max_tokens,
        "--temperature": temperature,
        "--manifest": {"name": qset.name, "sha256": qset.sha256},
        "--eval": user,
        **{f"{ds} revision": rev for ds, rev in short.items()},
        "--under-load": plan.under_load_spec,
        "--judge": judge,
    }
    return CapabilityMeasurement(
        items=tuple(items),
        thinking=plan.thinking,
        max_tokens=max_tokens,
        sampling=Sampling(plan.repeats, temperature, plan.timeout_s),
        revisions=short,
        manifest=manifest,
        options=options,
        scope={"datasets": datasets, "limit": plan.limit},  # a complete run asked for more questions resumes
        question_set=(qset.name, qset.sha256),
        data_dir=plan.data_dir,
        concurrency=plan.concurrency,
        code_judge=judge_code,
        judge_settings=plan.judge,
        under_load=plan.under_load,
        repeats_auto=auto,
    )
