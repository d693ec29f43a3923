"""Grade the real-answer corpus (tests/data/real_answers/, issue #55) with evalkit's replay and compare each grade
with the corpus's adjudicated grade.

    python benchmarks/bench_real_answers.py --data-dir /work/shared/datasets [--split dev|heldout|all]
        [--disagreements] [--graded-out FILE.jsonl]

It writes the corpus as one replay file (`id`, `content`, `reasoning` only), runs `evalkit capability --replay` on
it exactly as a user would (a fresh run directory in a temporary folder), and pairs `graded.jsonl` with the corpus
by `replay_line`. Printed per split and per dataset: lines, agreement of evalkit's `correct` with `adjudicated`,
the lines graded ambiguous, the outcomes, and agreement with the source's own grade where it has one. When
graded lines carry a `sure` field (the grader of issue #55), it also prints the share of unsure lines and the
agreement of the sure ones. The held-out split is meant to be read only at the end: pass `--split heldout` (or
`all`) deliberately.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "real_answers"


def load_corpus(corpus: Path = CORPUS) -> list[dict[str, Any]]:
    """Every corpus line, in file-name order then line order, with its file name added."""
    rows = []
    for path in sorted(corpus.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                row["_file"] = path.name
                rows.append(row)
    return rows


PACKAGES = {
    "evalkit": "evalkit",
    "evalkit_evals": "evals",
    "evalkit_stress": "stress",
    "evalkit_prompts": "prompts",
    "evalkit_report_templates": "report_templates",
}


def tree_at(commit: str, workdir: Path) -> dict[str, str]:
    """The environment that runs evalkit as committed at COMMIT (not the working tree, which others may be editing):
    `git archive` of the commit, its packages linked under their import names and put first on PYTHONPATH."""
    src = workdir / "src"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    shim = workdir / "pkgs"
    shim.mkdir()
    for name, folder in PACKAGES.items():
        (shim / name).symlink_to(src / folder)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(shim), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def replay(
    rows: list[dict[str, Any]], data_dir: str | None, workdir: Path, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """evalkit's replay grade of each row, in row order."""
    replay_file = workdir / "replay.jsonl"
    replay_file.write_text(
        "".join(
            json.dumps({"id": r["id"], "content": r["content"], "reasoning": r.get("reasoning")}, ensure_ascii=False)
            + "\n"
            for r in rows
        ),
        encoding="utf-8",
    )
    cmd = [sys.executable, "-m", "evalkit", "capability", "--replay", str(replay_file)]
    cmd += ["--out", str(workdir / "runs"), "--name", "real-answers"]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"evalkit replay failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    graded = {}
    for line in (workdir / "runs" / "real-answers" / "graded.jsonl").read_text(encoding="utf-8").splitlines():
        g = json.loads(line)
        graded[int(g["replay_line"])] = g
    if len(graded) != len(rows):
        sys.exit(f"replay graded {len(graded)} of {len(rows)} lines")
    return [graded[i + 1] for i in range(len(rows))]


def pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:5.1f}%" if b else "   n/a"


def table(pairs: list[tuple[dict[str, Any], dict[str, Any]]], key) -> list[str]:
    groups: dict[str, list] = defaultdict(list)
    for row, g in pairs:
        groups[key(row, g)].append((row, g))
        groups["all"].append((row, g))
    has_sure = any("sure" in g for _, g in pairs)
    head = f"{'group':<16}{'lines':>6}{'agree':>7}{'agree%':>8}{'ambig':>6}{'src=adj':>9}  outcomes"
    if has_sure:
        head += f"  {'unsure%':>8}{'sure-agree%':>12}"
    out = [head]
    for name in sorted(groups, key=lambda n: (n == "all", n)):
        items = groups[name]
        agree = sum(bool(g["correct"]) == bool(r["adjudicated"]) for r, g in items)
        ambig = sum(bool(g.get("ambiguous")) for _, g in items)
        with_src = [(r, g) for r, g in items if r.get("source_grade") is not None]
        src_agree = sum(bool(r["source_grade"]) == bool(r["adjudicated"]) for r, _ in with_src)
        outcomes = Counter(g["outcome"] for _, g in items)
        line = (
            f"{name:<16}{len(items):>6}{agree:>7}{pct(agree, len(items)):>8}{ambig:>6}"
            f"{pct(src_agree, len(with_src)):>9}  " + " ".join(f"{k}={v}" for k, v in sorted(outcomes.items()))
        )
        if has_sure:
            sure = [(r, g) for r, g in items if g.get("sure")]
            sure_agree = sum(bool(g["correct"]) == bool(r["adjudicated"]) for r, g in sure)
            line += f"  {pct(len(items) - len(sure), len(items)):>8}{pct(sure_agree, len(sure)):>12}"
        out.append(line)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None, help="the datasets (default $EVALKIT_DATA_DIR, else the Hub)")
    ap.add_argument("--split", choices=("dev", "heldout", "all"), default="dev")
    ap.add_argument("--disagreements", action="store_true", help="list every line where evalkit != adjudicated")
    ap.add_argument("--graded-out", default=None, help="write each corpus line with evalkit's grade here (JSONL)")
    ap.add_argument(
        "--at-commit",
        default=None,
        help="grade with evalkit as committed at this revision (git archive), not the working tree's code",
    )
    args = ap.parse_args(argv)

    rows = load_corpus()
    if args.split != "all":
        rows = [r for r in rows if r["split"] == args.split]
    with tempfile.TemporaryDirectory(prefix="real-answers-") as tmp:
        env = None
        if args.at_commit:
            env = tree_at(args.at_commit, Path(tmp))
            probe = [sys.executable, "-c", "import evalkit_evals, evalkit; print(evalkit_evals.__file__)"]
            where = subprocess.run(probe, capture_output=True, text=True, env=env, check=True).stdout.strip()
            if not where.startswith(tmp):
                sys.exit(f"--at-commit: evalkit_evals still imports from {where}")
            commit = subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", args.at_commit], capture_output=True, text=True, check=True
            ).stdout.strip()
            print(f"grader: evalkit at commit {commit} (git archive; evalkit_evals from {where})")
        else:
            print("grader: evalkit as installed (the working tree's code)")
        graded = replay(rows, args.data_dir, Path(tmp), env)
    pairs = list(zip(rows, graded, strict=True))

    print(f"corpus: {len(rows)} lines (split {args.split}); evalkit correct vs adjudicated")
    splits = sorted({r["split"] for r in rows})
    for split in splits:
        sub = [(r, g) for r, g in pairs if r["split"] == split]
        print(f"\n[{split}] by dataset")
        print("\n".join(table(sub, lambda r, g: g["dataset"])))
        print(f"\n[{split}] by source")
        print("\n".join(table(sub, lambda r, g: r["source"][:16])))
    if len(splits) > 1:
        print("\n[all splits] by dataset")
        print("\n".join(table(pairs, lambda r, g: g["dataset"])))

    if args.disagreements:
        print("\ndisagreements (evalkit correct != adjudicated):")
        for r, g in pairs:
            if bool(g["correct"]) != bool(r["adjudicated"]):
                print(
                    f"- {r['_file']} {r['id']} {r['model']}: evalkit {g['outcome']} ({g.get('rule')}; "
                    f"read {str(g.get('extracted'))[:60]!r}), adjudicated {r['adjudicated']}; {r.get('note', '')}"
                )
    if args.graded_out:
        with open(args.graded_out, "w", encoding="utf-8") as f:
            for r, g in pairs:
                keep = {k: g.get(k) for k in ("correct", "outcome", "extracted", "why", "rule", "ambiguous", "sure")}
                f.write(json.dumps({**{k: v for k, v in r.items() if k != "content"}, "evalkit": keep}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
