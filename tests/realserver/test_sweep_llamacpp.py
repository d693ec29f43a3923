"""`evalkit sweep` over a real CPU llama-server (SmolLM2-135M): `-np 1` and `-np 2` with a point between them whose
command fails (an unknown flag). Each point runs a tiny bench and one stress cycle; the report has one column per
point, each point's cancel verdict agrees with its own server log (llama.cpp's cancel and release lines), the failed
point is reported and the next one runs, and a second invocation keeps the finished points.

Sizes are tiny (500-token long prompts, 8-token bench, 24-token generations, the built-in cycle with its insert and
cancel times brought inside such a prefill) so that the sweep takes about a minute on 2 idle cores (2-4 minutes were
seen on a box shared with five other test runs); `-b 128` lets a cancel stop a prefill at a batch boundary.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from realserver_support import read_jsonl, run_evalkit

from evalkit.realserver.provisioning import Provisioned

pytestmark = pytest.mark.realserver

# llama.cpp's own words (tools/server): `stop: cancel task, id_task = N`, `id S | task N | stop processing: n_tokens`.
_CANCEL = re.compile(r"cancel task, id_task = (\d+)")
_TASK = re.compile(r"id\s+(\d+)\s*\|\s*task\s+(\d+)\s*\|")
_RELEASE = re.compile(r"stop processing: n_tokens = (\d+)")

SWEEP = """
name = "cpu-np"
baseline = "np1"

[vars]
llama_server = "llama-server"
model = "model.gguf"
scenario = "cycle.toml"
extra = ""

[server]
command = [
    "{llama_server}", "-m", "{model}", "--host", "127.0.0.1", "--port", "{port}", "--alias", "smollm2", "--metrics",
    "--no-webui", "-t", "1", "-tb", "1", "-np", "{np}", "-c", "{ctx}", "-b", "128", "-ub", "128", "{extra}",
]
start_timeout_s = 60

[reset]
between = "restart"

[[point]]
name = "np1"
params = { np = 1, ctx = 4096 }

[[point]]
name = "badflag"
params = { np = 1, ctx = 4096, extra = "--no-such-flag" }

[[point]]
name = "np2"
params = { np = 2, ctx = 8192 }

[[run]]
command = "bench"
args = ["--runs", "1", "--max-tokens", "8", "--warmup", "0", "--concurrency", "2"]

[[run]]
command = "stress"
args = ["--scenario", "{scenario}", "--cycles", "1", "--seed", "42", "--long-tokens", "500", "--long-max-tokens", "4",
        "--short-max-tokens", "8", "--gen-tokens", "24", "--no-progress"]
"""


# The built-in cycle (prompts/stress/default-cycle.toml) with its insert and cancel times brought inside a 500-token
# prefill (2.6 s on 2 idle cores; the built-in cancel comes 1-4 s in, after such a prefill has ended).
CYCLE = """
[[scenario]]
name = "long_alone"
  [[scenario.request]]
  id = "long"
  prompt = "long"

[[scenario]]
name = "short_insert"
  [[scenario.request]]
  id = "long"
  prompt = "long"
  [[scenario.request]]
  id = "short"
  prompt = "short"
  send = { offset = [0.3, 0.8] }

[[scenario]]
name = "double_insert"
  [[scenario.request]]
  id = "long"
  prompt = "long"
  [[scenario.request]]
  id = "short"
  prompt = "short"
  repeat = 2
  send = { offset = [0.3, 0.8] }

[[scenario]]
name = "cancel_then_short"
  [[scenario.request]]
  id = "long"
  prompt = "long"
  cancel = { offset = [0.5, 1.0] }
  [[scenario.request]]
  id = "short"
  prompt = "short"
  send = { after = "long", on = "done" }

[[scenario]]
name = "concurrent_gen"
  [[scenario.request]]
  id = "pair1"
  role = "gen_pair"
  prompt = "count"
  [[scenario.request]]
  id = "pair2"
  role = "gen_pair"
  prompt = "count"
  [[scenario.request]]
  id = "solo1"
  role = "gen_solo"
  same_as = "pair1"
  send = { after = ["pair1", "pair2"], on = "done" }
  [[scenario.request]]
  id = "solo2"
  role = "gen_solo"
  same_as = "pair2"
  send = { after = "solo1", on = "done" }
"""


def _log_says_aborted(run: Path, log_text: str) -> list[bool]:
    """For each cancelled long request, what the server's log alone says: its task's `stop processing: n_tokens`
    below its prompt (the prefill stopped early) or not. Read from the log's words, not its clock (compare-log's
    calibration needs the log read within 50 ms, which a loaded 2-core box does not promise)."""
    cancelled = [int(m.group(1)) for m in _CANCEL.finditer(log_text)]
    released = {}
    for line in log_text.splitlines():
        task, release = _TASK.search(line), _RELEASE.search(line)
        if task and release:
            released[int(task.group(2))] = int(release.group(1))
    prompts = [
        r.get("planned_prompt_tokens") or r.get("prompt_tokens")
        for r in read_jsonl(run / "requests.jsonl")
        if r.get("scenario") == "cancel_then_short" and r.get("role") == "long"
    ]
    assert len(cancelled) == len(prompts), (cancelled, prompts)
    return [released[t] < 0.98 * p for t, p in zip(cancelled, prompts)]


@pytest.fixture(scope="module")
def cpu_sweep(provisioned: Provisioned, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sweep run once (and a second time, to resume)."""
    tmp = tmp_path_factory.mktemp("sweep-llamacpp")
    (tmp / "sweep.toml").write_text(SWEEP)
    (tmp / "cycle.toml").write_text(CYCLE)
    sets = ["--set", f"llama_server={provisioned.binary}", "--set", f"model={provisioned.model}"]
    sets += ["--set", f"scenario={tmp / 'cycle.toml'}"]
    first = run_evalkit(["sweep", "sweep.toml", "--out", "out", *sets], cwd=tmp, timeout_s=300)
    sweep_dir = tmp / "out" / "cpu-np"
    report = run_evalkit(["report", str(sweep_dir), "-o", str(tmp / "report.md")], cwd=tmp)
    assert report.returncode == 0, report.stderr
    again = run_evalkit(["sweep", "sweep.toml", "--out", "out", *sets], cwd=tmp, timeout_s=120)
    return {"dir": sweep_dir, "first": first, "again": again, "report": (tmp / "report.md").read_text()}


def test_each_point_ran_and_the_bad_flag_was_reported(cpu_sweep: dict[str, Any]) -> None:
    """np1 and np2 done; the point between them failed to start, with llama-server's own words kept."""
    assert cpu_sweep["first"].returncode == 1, cpu_sweep["first"].stderr
    state = json.loads((cpu_sweep["dir"] / "sweep-state.json").read_text())
    status = {p["name"]: p for p in state["points"]}
    assert status["np1"]["status"] == "done" and status["np2"]["status"] == "done", state
    bad = status["badflag"]
    assert bad["status"] == "failed" and bad["failure"].startswith("did not start"), bad
    assert any("no-such-flag" in ln for ln in bad["log_tail"]), bad["log_tail"]
    for name, np in (("np1", 1), ("np2", 2)):
        man = json.loads((cpu_sweep["dir"] / "points" / name / "stress" / "manifest.json").read_text())
        assert f"-np {np}" in man["build"]["server_command"] and man["build"]["param.np"] == str(np)
        assert man["server_identity"]["server_type"] == "llama.cpp", man["server_identity"]
        assert man["server_identity"]["props"]["total_slots"] == np


def test_report_has_one_column_per_point(cpu_sweep: dict[str, Any]) -> None:
    """The points table has all three; the bench and stress tables one column per point that ran, baseline first."""
    report = cpu_sweep["report"]
    assert "| parameter | np1 | badflag | np2 |" in report
    assert "FAILED: did not start" in report
    assert "| prompt | np1 | np2 |" in report
    assert "|  | np1 | np2 |" in report  # the stress figures and diagnoses
    print(f"\n[realserver] sweep report:\n{report[:3000]}")


@pytest.mark.parametrize("point", ["np1", "np2"])
def test_cancel_verdict_agrees_with_the_points_own_log(cpu_sweep: dict[str, Any], point: str) -> None:
    """The point's cancel verdict (summary.json, in the report's diagnoses) is what that point's own server log says:
    aborted when the cancelled task's release shows fewer tokens than its prompt."""
    run = cpu_sweep["dir"] / "points" / point / "stress"
    verdict = json.loads((run / "summary.json").read_text())["diagnoses"]["cancel_aborts"]
    log = (cpu_sweep["dir"] / "points" / point / "server-stress.log").read_text(errors="replace")
    by_log = _log_says_aborted(run, log)
    print(f"\n[realserver] sweep {point}: cancel verdict {verdict['verdict']}; the log says aborted: {by_log}")
    assert by_log, verdict
    if verdict["verdict"] == "can't tell":
        # The cancel landed in the prefill's last step (a short prompt on a loaded box): an aborting server ends
        # there too, so its log cannot show an abort and the verdict must not guess (#39).
        assert "last step" in verdict["why"] and not any(by_log), (verdict, by_log)
        return
    assert verdict["verdict"] in ("yes", "no"), verdict
    assert all(a == (verdict["verdict"] == "yes") for a in by_log), (verdict, by_log)


def test_second_invocation_keeps_finished_points(cpu_sweep: dict[str, Any]) -> None:
    """Started again: np1 and np2 are kept as they were, only the failed point is tried again."""
    again = cpu_sweep["again"]
    assert again.returncode == 1, again.stderr
    assert "point np1: done earlier, kept" in again.stderr and "point np2: done earlier, kept" in again.stderr
    assert "point badflag: starting" in again.stderr
    assert "point np2: starting" not in again.stderr
