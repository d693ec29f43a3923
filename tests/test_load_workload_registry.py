"""Adding a load workload is one module of flags, plan, run and table plus one registration line: a toy `--pairs N`
workload (N users asking twice, built on the chat measurement), registered by one line in a launcher, joins
`evalkit load`'s flags, is checked like the built-ins (one workload at a time, no rate beside it, no targets or
dry run it does not take) and runs against `evalkit sim` into a summary."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from evalkit.commands import load_workloads
from evalkit.sim.launch import start_sim

# The one new module: a workload's flags, its plan from them, its run and its table.
TOY_WORKLOAD = '''"""Toy pairs: N users asking two questions each (a fixture: what a workload module holds)."""

from __future__ import annotations

import argparse

from evalkit.commands.load_workload_parts import LoadWorkload, common_options
from evalkit.commands.target_flags import run_options_from_args, target_from_args
from evalkit.config.argtypes import positive_int
from evalkit.load.chat_workloads import ChatWorkload, chat_measurement
from evalkit.session.measurement import run_measurement


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument_group("toy pairs").add_argument("--pairs", type=positive_int, metavar="N", help="N users x 2")


def run(args: argparse.Namespace) -> int:
    shape = {"users": args.pairs, "turns": 2, "think_s": 0.0}
    options = {**common_options(args), "mode": "conversation", "max_tokens": None, **shape}
    workload = ChatWorkload(
        kind="conversation",
        seed=args.seed,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        token_scale=args.token_scale,
        timeout_s=args.timeout_s,
        **shape,
    )
    return run_measurement(
        target_from_args(args),
        run_options_from_args(args),
        chat_measurement(workload, options),
        lambda s: print(f"pairs: {s['conversation']['sessions']['completed']} users asked twice", flush=True),
    )


WORKLOADS: tuple[LoadWorkload, ...] = (LoadWorkload("--pairs", "pairs", run),)
'''

LAUNCHER = """#!{python}
import runpy, sys
sys.path.insert(0, {folder!r})
from evalkit.commands import load_workloads
import toy_pairs; load_workloads.register(toy_pairs)  # the one registration line
module = sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def test_a_toy_workload_is_one_module_and_one_registration_line(tmp_path: Path) -> None:
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "toy_pairs.py").write_text(TOY_WORKLOAD, encoding="utf-8")
    launcher = folder / "launch"
    launcher.write_text(LAUNCHER.format(python=sys.executable, folder=str(folder)), encoding="utf-8")
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR)

    def load(*flags: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(launcher), "-m", "evalkit", "load", "--out", str(tmp_path), *flags]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    assert "--pairs N" in load("--help").stdout
    # Checked like the built-ins, in one line each, before any request.
    refusals = {
        ("--pairs", "2", "--conversations", "2"): "give one of --conversations, --pairs",
        ("--pairs", "2", "--rate", "1"): "--pairs sets its own load: drop --search, --rate and --concurrency",
        ("--pairs", "2", "--slo", "errors==0"): "--slo targets apply to --rate, --concurrency and --trace runs",
        ("--pairs", "2", "--dry-run"): "--dry-run prints a --rate, --concurrency or --trace plan",
    }
    for flags, line in refusals.items():
        p = load("--base-url", "http://127.0.0.1:9", *flags)
        assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].endswith(line), (flags, p.stderr)
    with start_sim(["--time-scale", "50", "--max-batch", "8"]) as sim:
        p = load("--base-url", sim.base_url, "--name", "pairs", "--pairs", "3", "--prompt-tokens", "30")
        asked = len(sim.events())
    assert p.returncode == 0, p.stderr[-2000:]
    assert "pairs: 3 users asked twice" in p.stdout
    run = tmp_path / "pairs"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["requests"] == 6 and summary["errors"] == 0
    assert summary["conversation"]["users"] == 3 and summary["conversation"]["turns"] == 2
    assert asked >= 6  # the sim answered every turn (and the token-scale probe)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["load"]["mode"] == "conversation" and manifest["load"]["users"] == 3


def test_the_builtins_are_listed_in_their_order() -> None:
    assert [w.flag for w in load_workloads.workloads()] == ["--trace", "--conversations", "--shared-prefix"]
