"""Adding a stress metric is one entry in stress/metric_registry.py: a new metric, registered by one line in a
launcher, is computed into `evalkit stress`'s summary from the right requests, counted when its situation did not
happen, and shown as a row of `evalkit report`'s stress table with its headline statistic, like the built-ins."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.errors import UsageError
from evalkit.sim.launch import start_sim
from evalkit_stress import metric_registry
from evalkit_stress.exercised import exercised

# What metric_registry.BUILTIN gains for a new metric: one entry. Registered at run time here, so the test leaves
# the tree alone; the launcher runs `-m MODULE ARGS` after it (as `python` would).
LAUNCHER = """#!{python}
import runpy, sys
from evalkit_stress import metric_registry as r
r.register(r.LineMetric("double_insert_done_s", ("double_insert",), "short", r.WHOLE_TIME, headline="max"))
module = sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def test_a_new_stress_metric_is_one_registry_entry(tmp_path: Path) -> None:
    launcher = tmp_path / "launch"
    launcher.write_text(LAUNCHER.format(python=sys.executable), encoding="utf-8")
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR)
    flags = ["--cycles", "2", "--seed", "7", "--time-scale", "100", "--long-tokens", "6000", "--no-progress"]
    with start_sim(["--profile", "dual-2080ti-after", "--time-scale", "100"]) as sim:
        p = subprocess.run(
            [str(launcher), "-m", "evalkit", "stress", "--base-url", sim.base_url, "--out", str(tmp_path)]
            + ["--name", "m", *flags],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert p.returncode == 0, p.stderr[-2000:]
    run = tmp_path / "m"
    summary = json.loads((run / "summary.json").read_text())
    lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
    # Its samples: the whole time of every double-insert short that was inserted and finished.
    mine = [
        x["t_done"] - x["t_sent"]
        for x in exercised(lines)
        if (x.get("scenario"), x.get("role"), x.get("status")) == ("double_insert", "short", "ok")
    ]
    assert len(mine) >= 2
    got = summary["metrics"]["double_insert_done_s"]
    assert got["n"] == len(mine) and got["max"] == pytest.approx(max(mine))
    # After the built-ins, and printed by the command like them.
    assert list(summary["metrics"])[-1] == "double_insert_done_s"
    assert "double_insert_done_s" in p.stdout
    # The same requests as double_insert_ttft_s feed it, so their tag stays that metric's.
    assert {x.get("metric") for x in lines if x.get("scenario") == "double_insert" and x.get("role") == "short"} == {
        "double_insert_ttft_s"
    }
    # The report shows it as a row with its own headline statistic.
    md = tmp_path / "report.md"
    r = subprocess.run(
        [str(launcher), "-m", "evalkit", "report", str(run), "-o", str(md)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "double_insert_done_s max" in md.read_text()


def test_the_registry_derives_what_was_written_by_hand() -> None:
    # The request tag, the not-exercised key, the report's row order and headline, each from the one list.
    def tag(scenario: str, role: str) -> str | None:
        m = metric_registry.line_metric(scenario, role)
        return m.name if m is not None else None

    assert tag("short_insert", "short") == "short_insert_ttft_s"
    assert tag("concurrent_gen", "gen_pair") == "concurrent_stream_tok_s"
    assert tag("cancel_then_short", "long") is None
    assert metric_registry.exercised_key("concurrent_gen", "gen_pair") == "concurrent_combined_tok_s"
    assert metric_registry.exercised_key("double_insert", "long") == "long_prefill_with_inserts_s"
    assert metric_registry.table_order()[:4] == (
        "short_insert_ttft_s",
        "short_insert_done_s",
        "double_insert_ttft_s",
        "post_cancel_ttft_s",
    )
    assert metric_registry.headline("post_cancel_ttft_s") == "max"
    assert metric_registry.headline("some_future_wait_s") == "p95"  # a metric unknown here: by its name
    assert metric_registry.same_requests("effective_concurrency") == "concurrent_combined_tok_s"
    with pytest.raises(UsageError, match="built-in"):
        metric_registry.register(metric_registry.LineMetric("long_prefill_s", ("long_alone",), "long", "ttft_s"))
