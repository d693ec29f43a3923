"""A snapshot of evalkit's behaviour, for proving a restructuring changed none of it (issue #41).

Runs a fixed set of commands and writes, per command, its exit code, stdout, stderr and every file it wrote, into
OUT_DIR, with what legitimately differs between two runs masked: temporary paths, ports, times of day, run salts,
and (for runs measured live against the sim) every measured number. Two snapshots of one behaviour are
byte-identical; `diff -r BEFORE AFTER` names what a change altered.

    python tools/behaviour_snapshot.py OUT_DIR [--data-dir ../shared/datasets] [--offline | --live-only]

It runs the code of the checkout it lives in, all of it (a link tree of every import name on PYTHONPATH): from a
worktree of another commit, `python WORKTREE/tools/behaviour_snapshot.py ...` with any evalkit venv snapshots that
commit.

Offline cases (exact, nothing masked but paths): `report` and `gate` over the contract fixtures of
tests/runfixtures.py (before/after pairs of each kind), `report` re-rendering the committed demo and H200 example
runs, `export`, and the one-line refusals for bad input. Live cases (masked numbers): `check`, `bench`, `stress`,
`capability` (a small subset) and `load` against `evalkit sim`, their run files and a `report` over them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import runfixtures as fx  # noqa: E402

EXAMPLES = REPO / "results" / "examples"
RULES = REPO / "examples" / "gate-rules.toml"

ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
PORT = re.compile(r"127\.0\.0\.1:\d+")
HEX_SALT = re.compile(r"\b[0-9a-f]{6,32}\b")
NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+(?:e[+-]?\d+)?")
EPOCH = re.compile(r"\b1[6-9]\d{8}(?:\.\d+)?\b")
DIGITS = re.compile(r"\d+")
# Summary fields that say how the client kept up (present or null by how busy the machine was).
LOAD_DEPENDENT_KEYS = {"note", "distorted", "distortion_reasons", "over_error_budget"}
# What a live run says about its own client, which depends on how busy the machine was (the same code on a busy
# machine warns, on an idle one not): left out of live cases, so only behaviour is compared.
LOAD_DEPENDENT = re.compile(
    r"client distorted|the client was the bottleneck|client, not the server|error budget|"
    r"first-token stamps may lie|read answers .* late"
)


class Snapshot:
    """The folder a snapshot is written to, one subfolder per case."""

    def __init__(self, out: Path, work: Path) -> None:
        self.out, self.work = out, work

    def text(self, raw: str, live: bool) -> str:
        """A command's words with this machine's paths (and, live, its measured numbers) masked."""
        s = raw.replace(str(self.work), "<work>").replace(str(REPO), "<repo>")
        s = PORT.sub("127.0.0.1:<port>", s)
        s = ISO_TIME.sub("<time>", s)
        if live:
            s = EPOCH.sub("<epoch>", s)
            s = HEX_SALT.sub("<hex>", s)
            s = NUMBER.sub("<n>", s)
            s = DIGITS.sub("<n>", s)
            s = "\n".join(line for line in s.split("\n") if not LOAD_DEPENDENT.search(line))
        return s

    def case(self, name: str, argv: list[str], live: bool = False, files: Path | None = None) -> int:
        """Run `evalkit argv`; record its exit code, stdout, stderr and the files under `files`."""
        env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
        p = subprocess.run(
            [sys.executable, "-m", "evalkit", *argv],
            capture_output=True,
            text=True,
            cwd=self.work,
            env=env,
            timeout=900,
        )
        d = self.out / name
        d.mkdir(parents=True, exist_ok=True)
        shown = [self.text(a, live) for a in argv]
        (d / "command.txt").write_text(" ".join(shown) + f"\nexit {p.returncode}\n")
        (d / "stdout.txt").write_text(self.text(p.stdout, live))
        (d / "stderr.txt").write_text(self.text(_drop_progress(p.stderr), live))
        if files is not None and files.exists():
            for f in sorted(x for x in files.rglob("*") if x.is_file()):
                rel = f.relative_to(files)
                dest = d / "files" / self.text(str(rel), live)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(self.file_text(f, live))
        return p.returncode

    def file_text(self, f: Path, live: bool) -> str:
        """A written file, masked: JSON values by type when live, text by pattern."""
        try:
            raw = f.read_text()
        except UnicodeDecodeError:
            return f"<binary {f.stat().st_size if not live else 'n'} bytes>\n"
        if live and f.suffix in (".html", ".png"):
            return f"<{f.suffix[1:]}: measured, not compared>\n"
        if live and f.suffix in (".json", ".jsonl"):
            out = []
            for line in raw.splitlines() if f.suffix == ".jsonl" else [raw]:
                try:
                    v = json.loads(line)
                except json.JSONDecodeError:
                    out.append(self.text(line, live))
                    continue
                out.append(json.dumps(_mask(v, self, live), sort_keys=True, indent=None if f.suffix == ".jsonl" else 1))
            if f.suffix == ".jsonl":  # concurrent requests are appended in the order they end
                out.sort()
            return "\n".join(out) + "\n"
        if f.suffix in (".png", ".parquet"):
            return f"<binary {'n' if live else f.stat().st_size} bytes>\n"
        return self.text(raw, live)


def _kind_rules(toml: str, kind: str) -> str:
    """The rules of a gate file that look at one kind of run (a gate refuses a rule whose metric no run has)."""
    blocks = toml.split("[[rule]]")
    keep = [b for b in blocks[1:] if (kind == "all" or f'metric = "{kind}.' in b) and "post_cancel" not in b]
    return "".join("[[rule]]" + b for b in keep)  # (the stress fixture has no cancel scenario)


def _drop_progress(s: str) -> str:
    """Progress bars redraw with carriage returns at times that vary: keep each line's last state only."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in s.split("\n"))


def _mask(v: Any, snap: Snapshot, live: bool) -> Any:
    """A live run's JSON as its shape: every key, list and nesting kept, every value masked (a figure the run could
    not measure on a busy machine is null where an idle one has a number)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return "<v>"
    if isinstance(v, list):
        return [_mask(x, snap, live) for x in v]
    if isinstance(v, dict):
        return {
            snap.text(str(k), live): "<load-dependent>" if k in LOAD_DEPENDENT_KEYS else _mask(x, snap, live)
            for k, x in v.items()
        }
    return v


# -- offline cases ------------------------------------------------------------------------------------------------
def offline(snap: Snapshot) -> None:
    w = snap.work / "fixtures"
    rates_a = {"code": 100.0, "math": 95.0, "prose": 90.0}
    rates_b = {"code": 80.0, "math": 96.0, "prose": 90.5}
    pairs = {
        "bench": (
            fx.bench_run(w / "bench-before", "before", rates_a, combined=150.0, seed=1),
            fx.bench_run(w / "bench-after", "after", rates_b, combined=120.0, seed=2),
        ),
        "capability": (
            fx.capability_run(w / "cap-before", "before", {"gsm8k:1", "math500:3"}),
            fx.capability_run(w / "cap-after", "after", {f"gsm8k:{i}" for i in range(9)} | {"musr:2"}),
        ),
        "stress": (
            fx.stress_run(w / "stress-before", "before", 8.0, seed=1),
            fx.stress_run(w / "stress-after", "after", 0.4, seed=2),
        ),
    }
    everything: list[str] = []
    for kind, (a, b) in pairs.items():
        everything += [str(a), str(b)]
        out = snap.work / f"report-{kind}"
        out.mkdir()
        snap.case(f"fixture-report-{kind}", ["report", str(a), str(b), "-o", str(out / "report.md")], files=out)
        snap.case(f"fixture-report-{kind}-labels", ["report", str(a), str(b), "--labels", "old,new"])
        rules = snap.work / f"rules-{kind}.toml"
        rules.write_text(_kind_rules(RULES.read_text(), kind))
        j = snap.work / f"gate-{kind}"
        snap.case(
            f"fixture-gate-{kind}",
            ["gate", str(b), "--baseline", str(a), "--rules", str(rules), "--junit", str(j / "gate.xml")],
            files=j,
        )
        snap.case(f"fixture-gate-{kind}-self", ["gate", str(a), "--baseline", str(a), "--rules", str(rules)])
    befores, afters = everything[0::2], everything[1::2]
    j = snap.work / "gate-all"
    rules = snap.work / "rules-all.toml"
    rules.write_text(_kind_rules(RULES.read_text(), "all"))
    snap.case(
        "fixture-gate-all",
        ["gate", *afters, "--baseline", *befores, "--rules", str(rules), "--junit", str(j / "gate.xml")],
        files=j,
    )
    out = snap.work / "report-all"
    snap.case("fixture-report-all", ["report", *everything, "-o", str(out / "report.md")], files=out)

    demo = sorted(p for p in (EXAMPLES / "demo").iterdir() if (p / "summary.json").exists())
    out = snap.work / "report-demo"
    snap.case("example-demo-report", ["report", *map(str, demo), "-o", str(out / "report.md")], files=out)
    for i, run in enumerate(sorted(p.parent for p in EXAMPLES.rglob("summary.json") if "demo" not in p.parts)):
        out = snap.work / f"report-example-{i}"
        snap.case(f"example-{i:03d}-{run.name}", ["report", str(run), "-o", str(out / "report.md")], files=out)
    for i, run in enumerate(demo):
        out = snap.work / f"export-{i}"
        snap.case(f"example-export-{run.name}", ["export", str(run), "-o", str(out / "table.csv")], files=out)

    bad = snap.work / "bad.toml"
    bad.write_text("[[rule]]\nmetric = 'bench.prompts.code.tok_s'\nop = '~'\nvalue = 1\n")
    refusals = {
        "refuse-report-missing": ["report", str(snap.work / "nope")],
        "refuse-gate-bad-rules": ["gate", str(pairs["bench"][0]), "--rules", str(bad)],
        "refuse-gate-missing-rules": ["gate", str(pairs["bench"][0]), "--rules", str(snap.work / "none.toml")],
        "refuse-bench-bad-url": ["bench", "--base-url", "not a url", "--out", str(snap.work / "x")],
        "refuse-stress-cycles": ["stress", "--base-url", "http://127.0.0.1:9/v1", "--cycles", "0"],
        "refuse-capability-thinking": ["capability", "--base-url", "http://127.0.0.1:9/v1", "--thinking", "max"],
        "refuse-unknown-command": ["frobnicate"],
    }
    for name, argv in refusals.items():
        snap.case(name, argv)


# -- live cases against the sim -----------------------------------------------------------------------------------
@contextmanager
def _sim(flags: list[str]) -> Iterator[str]:
    from evalkit.sim.launch import start_sim

    with start_sim(flags) as sim:
        yield sim.base_url


def live(snap: Snapshot, data_dir: str | None) -> None:
    runs = snap.work / "runs"
    with _sim(["--profile", "dual-2080ti-after", "--time-scale", "20", "--seed", "7"]) as url:
        base = ["--base-url", url, "--out", str(runs)]
        steps: list[tuple[str, list[str], Callable[[], Path | None]]] = [
            ("live-check", ["check", "--base-url", url], lambda: None),
            (
                "live-bench",
                ["bench", *base, "--name", "bench", "--runs", "1", "--max-tokens", "32"],
                lambda: runs / "bench",
            ),
            (
                "live-stress",
                ["stress", *base, "--name", "stress", "--cycles", "1", "--seed", "42", "--time-scale", "20"]
                + ["--long-tokens", "4000", "--no-progress"],
                lambda: runs / "stress",
            ),
        ]
        if data_dir:
            steps.append(
                (
                    "live-capability",
                    ["capability", *base, "--name", "cap", "--thinking", "off", "--data-dir", data_dir, "--limit", "2"],
                    lambda: runs / "cap",
                )
            )
        for name, argv, where in steps:
            snap.case(name, argv, live=True, files=where())
    done = [str(p) for p in (runs / "bench", runs / "stress", runs / "cap") if (p / "summary.json").exists()]
    out = snap.work / "report-live"
    snap.case("live-report", ["report", *done, "-o", str(out / "report.md")], live=True, files=out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--data-dir", default=os.environ.get("EVALKIT_DATA_DIR"))
    ap.add_argument("--offline", action="store_true", help="only the exact cases (no sim)")
    ap.add_argument("--live-only", action="store_true", help="only the cases measured live against the sim")
    a = ap.parse_args()
    if a.out.exists():
        shutil.rmtree(a.out)
    a.out.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="evalkit-snapshot-") as tmp:
        snap = Snapshot(a.out.resolve(), Path(tmp).resolve())
        if not a.live_only:
            offline(snap)
        if not a.offline:
            live(snap, a.data_dir)
    print(f"{sum(1 for _ in a.out.iterdir())} cases in {a.out}")
    return 0


def _this_checkouts_code() -> None:
    """Run (and let every `python -m evalkit` it starts run) this checkout's code, all of it: a link tree of every
    import name (pyproject's package-dir: evalkit, evalkit_evals, evalkit_stress ...) on PYTHONPATH, then exec again.
    From a worktree of another commit, `PYTHONPATH=WORKTREE` alone would take evals/ and stress/ from whichever
    checkout the venv's editable install points at, and compare two mixes of code."""
    if os.environ.get("EVALKIT_SNAPSHOT_LINKS"):
        return
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    links = Path(tempfile.mkdtemp(prefix="evalkit-snapshot-links-"))
    for name, folder in dirs.items():
        if name:
            (links / name).symlink_to(REPO / folder)
    env = {**os.environ, "EVALKIT_SNAPSHOT_LINKS": str(links)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(links), os.environ.get("PYTHONPATH", "")) if p)
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


if __name__ == "__main__":
    _this_checkouts_code()
    sys.exit(main())
