"""`evalkit demo`: the main job end to end on simulated servers, no GPU needed.

It starts `evalkit sim` twice over, with the reference write-up's "before" and "after" builds, runs a short
bench, a capability subset and a stress test against each, and renders the before/after report. Bench and
capability run in real time; stress runs `--time-scale` times faster (its latencies are reported in the
scaled seconds the run actually saw, and the report says so through each run's manifest).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path
from typing import TextIO

from evalkit.config.argtypes import positive_float, positive_int, run_name
from evalkit.runs.rundir import default_run_name

BUILDS = (
    # label, sim profile, capability accuracy of the simulated model
    ("before", "dual-2080ti-before", "0.93"),
    ("after", "dual-2080ti-after", "0.95"),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit demo`."""
    p.add_argument("--out", type=Path, default=Path("results"), help="parent of the demo folder (default results/)")
    p.add_argument("--name", type=run_name, help="demo folder name (default demo-<timestamp>)")
    p.add_argument(
        "--time-scale",
        type=positive_float,
        default=20.0,
        help="how much faster than real time the stress sims run (default 20)",
    )
    p.add_argument("--cycles", type=positive_int, default=2, help="stress cycles per build (default 2)")
    p.add_argument("--limit", type=positive_int, default=3, help="capability questions per dataset (default 3)")
    p.add_argument("--data-dir", help="local dataset copies (default $EVALKIT_DATA_DIR, else the Hub)")


# Hints the steps give name their own flags, which the demo does not take: said in the demo's terms instead.
_HINTS = {"try --client-procs 2 or fewer streams": "a real server's bench or stress takes --client-procs 2"}


class _DemoStderr(io.TextIOBase):
    """Standard error as the steps write it, with their flag hints put in the demo's terms."""

    def __init__(self, real: TextIO) -> None:
        self.real = real

    def write(self, text: str) -> int:
        for hint, said in _HINTS.items():
            text = text.replace(hint, said)
        return self.real.write(text)

    def flush(self) -> None:
        self.real.flush()

    def isatty(self) -> bool:
        return self.real.isatty()


def _evalkit(argv: list[str], show_path: bool = True) -> Path:
    """Run one evalkit command in-process; return the run directory it printed last."""
    from evalkit.cli import main
    from evalkit.errors import UsageError

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(_DemoStderr(sys.stderr)):
        code = main(argv)
    lines = buf.getvalue().strip().splitlines()
    if code not in (0, 1) or not lines:
        raise UsageError(f"demo step `evalkit {' '.join(argv[:1])}` failed with exit {code}")
    body = "\n".join(lines[:-1]).rstrip()
    if body:
        print(body)  # the command's own table, for the reader
    if show_path:
        print(f"-> {lines[-1]}", flush=True)  # each run directory once; the report's path comes before the answer
    return Path(lines[-1])


def _build_flags(profile: str) -> list[str]:
    """The build label and settings of a sim profile, so the report names each build and says what differs."""
    from evalkit.sim.profiles import PROFILES

    p = PROFILES[profile]
    info = {
        "slots": p.get("max_batch"),
        "prefill_yields": p.get("yield_prefill"),
        "cancel_aborts": p.get("cancel_aborts"),
        "decode_tok_s": p.get("decode_rate"),
    }
    flags = ["--build-label", profile]
    for k, v in info.items():
        flags += ["--build-info", f"{k}={v}"]
    return flags


def _datasets_reachable(data_dir: str | None) -> list[str]:
    """The capability datasets that load here (from `data_dir`, else the Hub); one line on stderr for each that
    does not, saying why (HumanEval+ needs evalplus, the `hub` extra)."""
    import importlib.util

    from evalkit.errors import UsageError
    from evalkit_evals.registry import BUILTIN, get

    ok = []
    for name in BUILTIN:
        if name == "humanevalplus" and importlib.util.find_spec("evalplus") is None:
            sys.stderr.write(
                "evalkit demo: skipping HumanEval+: evalplus is not installed (pip install 'evalkit[hub]', "
                "or -e '.[hub]' in a checkout)\n"
            )
            continue
        try:
            get(name).load(data_dir)
        except UsageError as e:
            sys.stderr.write(f"evalkit demo: skipping {name}: {e}\n")
            continue
        ok.append(name)
    if not ok:
        sys.stderr.write("evalkit demo: skipping capability: no dataset could be read\n")
    return ok


def _sandbox_flags(with_capability: bool) -> list[str]:
    """`--unsafe-exec` when bubblewrap cannot run here: the demo's HumanEval+ answers are the sim's own, not a
    model's, so a fresh machine without `apt-get install bubblewrap` still runs the demo (one line says so)."""
    if not with_capability:
        return []
    from evalkit_evals.isolation import find_bubblewrap

    why = find_bubblewrap()
    if not isinstance(why, str):
        return []
    sys.stderr.write(
        f"evalkit demo: {why}: the sim's HumanEval+ answers run with resource limits only (--unsafe-exec); "
        "a real model's code needs bubblewrap\n"
    )
    return ["--unsafe-exec"]


ANSWER_HEADING = "## The answer"


def answer_lines(report_md: str) -> list[str]:
    """The report's answer as it reads in report.md: each `## The answer: ...` heading and its lines, with their
    marks and flags (the key legend and the sections after it left out)."""
    out: list[str] = []
    inside = False
    for line in report_md.splitlines():
        if line.startswith("## "):
            inside = line.startswith(ANSWER_HEADING)
            if inside:
                out.append(line[3:])
            continue
        if inside and line.lstrip().startswith("- "):
            out.append(line)
    return out


def run(args: argparse.Namespace) -> int:
    """Run the demo; it ends with the report's answer lines, after the paths of report.md and report.html."""
    from evalkit.sim.launch import start_sim
    from evalkit_evals.registry import BUILTIN

    folder = args.out / (args.name or default_run_name("demo"))
    folder.mkdir(parents=True, exist_ok=True)
    if args.data_dir:
        if not Path(args.data_dir).is_dir():
            from evalkit.errors import UsageError

            raise UsageError(f"--data-dir {args.data_dir} is not a directory")
        args.data_dir = str(Path(args.data_dir).resolve())
        os.environ["EVALKIT_DATA_DIR"] = args.data_dir
    data_dir = args.data_dir or os.environ.get("EVALKIT_DATA_DIR")
    data = ["--data-dir", data_dir] if data_dir else []
    reachable = _datasets_reachable(data_dir)
    with_capability = bool(reachable)
    subset = [] if tuple(reachable) == BUILTIN else ["--datasets", ",".join(reachable)]
    sandbox = _sandbox_flags("humanevalplus" in reachable)
    scale = f"{args.time_scale:g}"
    runs: list[Path] = []
    labels: list[str] = []
    for label, profile, accuracy in BUILDS:
        # Each sim listens on a new port: a demo started again measures again (--fresh), never resumes.
        common = ["--out", str(folder), "--fresh", *_build_flags(profile)]
        print(f"== {label}: evalkit sim --profile {profile}", flush=True)
        with start_sim(["--profile", profile, "--accuracy", accuracy, *data]) as sim:
            url = ["--base-url", sim.base_url]
            runs.append(
                _evalkit(
                    ["bench", *url, *common, "--name", f"{label}-bench", "--max-tokens", "128", "--concurrency", "2"]
                )
            )
            if with_capability:
                runs.append(
                    _evalkit(
                        [
                            "capability",
                            *url,
                            *common,
                            "--name",
                            f"{label}-capability",
                            "--thinking",
                            "off",
                            "--limit",
                            str(args.limit),
                            "--concurrency",
                            "2",
                            *data,
                            *subset,
                            *sandbox,
                        ]
                    )
                )
        with start_sim(["--profile", profile, "--time-scale", scale, *data]) as sim:
            runs.append(
                _evalkit(
                    [
                        "stress",
                        "--base-url",
                        sim.base_url,
                        *common,
                        "--name",
                        f"{label}-stress",
                        "--cycles",
                        str(args.cycles),
                        "--seed",
                        "42",
                        "--time-scale",
                        scale,
                        # The cancel verdict reads the sim's request gauges around the cancel: scraped every
                        # 50 ms, one falls in the cancelled request's life and one just after it, so the after
                        # build's aborting cancel reads "yes", not "can't tell" (the default 1 s misses both).
                        "--metrics-interval",
                        "0.05",
                    ]
                )
            )
        labels += [label] * (len(runs) - len(labels))
    report = folder / "report.md"
    _evalkit(["report", *map(str, runs), "--labels", ",".join(labels), "-o", str(report)], show_path=False)
    print(f"report: {report}", flush=True)
    if report.with_suffix(".html").is_file():
        print(f"page:   {report.with_suffix('.html')}", flush=True)
    print("", flush=True)
    for line in answer_lines(report.read_text(encoding="utf-8")):
        print(line, flush=True)
    print("(▲ better beyond noise, ▼ worse, ≈ within noise, ? cannot tell, ⚠ a run flags its own figures)", flush=True)
    return 0
