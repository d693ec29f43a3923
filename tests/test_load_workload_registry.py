"""Adding a load workload is one module of flags, plan, run and table plus one registration line: a toy `--pairs N`
workload (N users asking twice, built on the conversation plan), registered by one line in a launcher, joins
`evalkit load`'s flags, is checked like the built-ins (one workload at a time, no rate beside it, no targets or
dry run it does not take) and runs against `evalkit sim` into a summary. A workload that sends differently is its
own plan and sender in that one module: a toy `--plain N` sends N plain requests one after another through the
run's client and writes their lines, with nothing of the built-in workloads' sending."""

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

from evalkit.commands.load_workload_parts import LoadWorkload
from evalkit.commands.target_flags import run_options_from_args, target_from_args
from evalkit.config.argtypes import positive_int
from evalkit.load.chat_workloads import ChatLengths, ConversationPlan
from evalkit.load.measure import LoadMeasurement, LoadPlan
from evalkit.session.measurement import run_measurement


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument_group("toy pairs").add_argument("--pairs", type=positive_int, metavar="N", help="N users x 2")


def run(args: argparse.Namespace) -> int:
    chat = ChatLengths(args.prompt_tokens, args.output_tokens, None, args.token_scale, args.timeout_s)
    plan = LoadPlan(ConversationPlan(users=args.pairs, turns=2, chat=chat), seed=args.seed)
    return run_measurement(
        target_from_args(args),
        run_options_from_args(args),
        LoadMeasurement(plan),
        lambda s: print(f"pairs: {s.to_json()['conversation']['sessions']['completed']} users asked twice", flush=True),
    )


WORKLOADS: tuple[LoadWorkload, ...] = (LoadWorkload("--pairs", "pairs", run),)
'''

# A workload with its own sender: its plan sends N plain requests one after another through the run's client,
# writes their lines and returns its summary; the module holds its flags, plan, sender, run and table.
TOY_PLAIN = '''"""Toy plain: N single requests one after another (a fixture: a workload that sends its own way)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import ClassVar

from evalkit.client.chat import ChatRequest, new_request_id
from evalkit.client.prompts import GenQuestion
from evalkit.commands.load_workload_parts import LoadWorkload
from evalkit.commands.target_flags import run_options_from_args, target_from_args
from evalkit.config.argtypes import positive_int
from evalkit.load.measure import LoadMeasurement, LoadPlan
from evalkit.load.records import LoadSettings, common_settings
from evalkit.load.summary_records import LoadSummaryJson
from evalkit.runs.judge_response import judge
from evalkit.runs.rundir import REQUESTS
from evalkit.session.context import RunContext
from evalkit.session.measurement import run_measurement


@dataclass(frozen=True)
class PlainPlan:
    errors_fail: ClassVar[bool] = True
    invalid_fails: ClassVar[bool] = False

    requests: int
    timeout_s: float = 300.0

    def settings(self) -> LoadSettings:
        out = common_settings("1", "3", self.timeout_s)
        out["mode"], out["requests"] = "plain", self.requests
        return out

    async def send(self, ctx: RunContext, seed: int) -> LoadSummaryJson:
        outcomes = []
        question = GenQuestion(3)  # "Count from 1 to 3 ...": an answer the sim gives and the judge checks
        for i in range(self.requests):
            rec = await ctx.client.chat(
                ChatRequest(
                    messages=[{"role": "user", "content": question.text}],
                    max_tokens=16,
                    temperature=0.0,
                    request_id=new_request_id("plain"),
                    timeout_s=self.timeout_s,
                )
            )
            verdict = judge(rec, "generation", question.answer, planned_cancel=False)
            line = rec.to_json()
            line.update({"workload": "plain", "index": i, "phase": "measured", "outcome": verdict.outcome})
            ctx.rundir.append(REQUESTS, line)
            outcomes.append(verdict.outcome)
        await ctx.evidence.end()
        return {
            "kind": "load",
            "seed": seed,
            "mode": "plain",
            "slo": [],
            "requests": len(outcomes),
            "errors": outcomes.count("error"),
            "wrong_answers": outcomes.count("wrong"),
            "points": [],
        }


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument_group("toy plain").add_argument("--plain", type=positive_int, metavar="N", help="N requests")


def run(args: argparse.Namespace) -> int:
    plan = LoadPlan(PlainPlan(args.plain, args.timeout_s), seed=args.seed)
    return run_measurement(
        target_from_args(args),
        run_options_from_args(args),
        LoadMeasurement(plan),
        lambda s: print(f"plain: {s.to_json()['requests']} requests, {s.to_json()['errors']} errors", flush=True),
    )


WORKLOADS: tuple[LoadWorkload, ...] = (LoadWorkload("--plain", "plain", run),)
'''

LAUNCHER = """#!{python}
import runpy, sys
sys.path.insert(0, {folder!r})
from evalkit.commands import load_workloads
import {module}; load_workloads.register({module})  # the one registration line
module = sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def test_a_toy_workload_is_one_module_and_one_registration_line(tmp_path: Path) -> None:
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "toy_pairs.py").write_text(TOY_WORKLOAD, encoding="utf-8")
    launcher = folder / "launch"
    launcher.write_text(
        LAUNCHER.format(python=sys.executable, folder=str(folder), module="toy_pairs"), encoding="utf-8"
    )
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


def test_a_workload_that_sends_its_own_way_is_one_module_and_one_registration_line(tmp_path: Path) -> None:
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "toy_plain.py").write_text(TOY_PLAIN, encoding="utf-8")
    launcher = folder / "launch"
    launcher.write_text(
        LAUNCHER.format(python=sys.executable, folder=str(folder), module="toy_plain"), encoding="utf-8"
    )
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR)
    cmd = [str(launcher), "-m", "evalkit", "load", "--out", str(tmp_path)]
    with start_sim(["--time-scale", "50"]) as sim:
        p = subprocess.run(
            [*cmd, "--base-url", sim.base_url, "--name", "plain", "--plain", "4"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        asked = len(sim.events())
    assert p.returncode == 0, p.stderr[-2000:]
    assert "plain: 4 requests, 0 errors" in p.stdout
    run = tmp_path / "plain"
    assert p.stdout.strip().splitlines()[-1] == str(run)  # the run directory's path, last, as every run's
    lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
    assert [x["index"] for x in lines] == [0, 1, 2, 3] and {x["outcome"] for x in lines} == {"correct"}
    assert asked >= 4  # the sim answered each of its sends
    summary = json.loads((run / "summary.json").read_text())
    assert summary["kind"] == "load" and summary["mode"] == "plain" and summary["requests"] == 4
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["seed"] == 42 and manifest["load"]["mode"] == "plain" and manifest["load"]["requests"] == 4


def test_the_builtins_are_listed_in_their_order() -> None:
    assert [w.flag for w in load_workloads.workloads()] == ["--trace", "--conversations", "--shared-prefix"]
