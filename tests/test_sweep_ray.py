"""`evalkit sweep FILE --ray ADDRESS` on a real local Ray cluster (a head and one more node on this machine, custom
resources `host_a` / `host_b` standing in for GPU labels) with `evalkit sim` servers: four points over the two "hosts"
run two at a time, and their verdicts equal each point's ground truth and the same sweep run locally; a node lost
mid-point fails that point only, and starting the sweep again completes it. Without Ray, `--ray` is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from ray.cluster_utils import Cluster  # the test extra installs Ray: in CI these tests run, never skip

# 10, not 40: an inserted short is sent 0.5-3 s (model time) after the long prompt; at 40 that is 12-75 ms, less than
# a starved sim may take to read the long body on a busy machine, and a short that reached the engine first was
# called "not blocked" (run 19 of 2026-12-06, two busy loops). The lost-node test checks no verdict: 40 there.
TIME_SCALE = 10
STORE = 80 * 1024 * 1024  # each node's object store (Ray's default is 30% of the machine's memory a node)
# name -> (slots, yields, host): the ground truth each sim is started with, and the node its point needs.
TRUTH = {
    "noyield-1slot": (1, False, "host_a"),
    "noyield-2slots": (2, False, "host_b"),
    "yield-1slot": (1, True, "host_a"),
    "yield-2slots": (2, True, "host_b"),
}


def sweep_text(points: dict[str, tuple[int, bool, str]], gen_tokens: int = 400, time_scale: int = TIME_SCALE) -> str:
    body = "".join(
        f'\n[[point]]\nname = "{name}"\nresources = {{ {host} = 1 }}\n'
        f'params = {{ slots = {slots}, yield_flag = "{"--yield" if yields else "--no-yield"}" }}\n'
        for name, (slots, yields, host) in points.items()
    )
    return f"""
name = "ray-truth"
baseline = "{next(iter(points))}"

[server]
command = "{{python}} -m evalkit sim --port {{port}} --max-batch {{slots}} {{yield_flag}} --time-scale {time_scale}"
start_timeout_s = 60

[reset]
between = "none"
{body}
[[run]]
command = "stress"
args = ["--cycles", "1", "--seed", "7", "--long-tokens", "8000", "--gen-tokens", "{gen_tokens}", "--time-scale",
        "{time_scale}", "--no-progress"]
"""


def evalkit(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def verdicts(sweep_dir: Path, name: str) -> tuple[str, str]:
    d = json.loads((sweep_dir / "points" / name / "stress" / "summary.json").read_text())["diagnoses"]
    return d["head_of_line_blocking"]["verdict"], d["concurrency"]["verdict"]


def when(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


@pytest.fixture(scope="module")
def cluster() -> Any:
    """A head with `host_a` and a second node with `host_b`, one CPU each (the points hold none: their servers and
    commands are processes of their own)."""
    small = {"num_cpus": 1, "object_store_memory": STORE}  # the points send records, not data
    c = Cluster(initialize_head=True, head_node_args={**small, "resources": {"host_a": 1}, "include_dashboard": False})
    c.add_node(**small, resources={"host_b": 1})
    c.wait_for_nodes()
    yield c
    c.shutdown()


def test_four_points_on_two_hosts_equal_the_truth_and_a_local_sweep(cluster: Any, tmp_path: Path) -> None:
    (tmp_path / "sweep.toml").write_text(sweep_text(TRUTH))
    t0 = time.monotonic()
    p = evalkit("sweep", "sweep.toml", "--out", "ray", "--ray", cluster.address, cwd=tmp_path)
    ray_s = time.monotonic() - t0
    assert p.returncode == 0, p.stderr[-3000:]
    assert "ray: 2 node(s)" in p.stderr
    # The tasks' lines come through Ray into this log without terminal colour codes, each point's own line kept
    # (not folded into another's by Ray's deduplication) (issue #58).
    assert "\x1b[" not in p.stdout + p.stderr and "repeated" not in p.stdout
    # Each point's line at most once: Ray forwards a task's output from a log monitor of its own, so a line a task
    # printed just before it ended may reach the driver after it disconnected (seen: a point's "done" missing from a
    # run whose state file recorded the point done); what this checks is that nothing is doubled or folded.
    for point in TRUTH:
        assert sum(f"] point {point}: done" in ln for ln in p.stdout.splitlines()) <= 1, p.stdout[-3000:]
    t0 = time.monotonic()
    local = evalkit("sweep", "sweep.toml", "--out", "local", cwd=tmp_path)
    local_s = time.monotonic() - t0
    assert local.returncode == 0, local.stderr[-3000:]
    print(f"\nsweep of 4 points: on 2 Ray nodes {ray_s:.1f} s, locally {local_s:.1f} s")
    on_ray, here = tmp_path / "ray" / "ray-truth", tmp_path / "local" / "ray-truth"
    state = json.loads((on_ray / "sweep-state.json").read_text())
    assert {pt["name"]: pt["status"] for pt in state["points"]} == dict.fromkeys(TRUTH, "done")
    for name, (slots, yields, _) in TRUTH.items():
        got = verdicts(on_ray, name)
        assert got == ("no" if yields else "yes", "yes" if slots == 2 else "no"), (name, got)
        assert got == verdicts(here, name), name
        # the same run files as the local sweep's (their figures are timings)
        files = sorted(x.name for x in (on_ray / "points" / name / "stress").iterdir())
        assert files == sorted(x.name for x in (here / "points" / name / "stress").iterdir()), name
    # points on different hosts ran at once; the two that need one host queued there
    spans = {pt["name"]: (when(pt["started"]), when(pt["finished"])) for pt in state["points"]}
    a, b = spans["noyield-1slot"], spans["noyield-2slots"]
    assert a[0] <= b[1] and b[0] <= a[1], spans
    a2 = spans["yield-1slot"]
    assert a2[0] >= a[1] - 1 or a[0] >= a2[1] - 1, spans  # host_a holds one point at a time (1 s: stamp rounding)
    report = evalkit("report", str(on_ray), "-o", str(tmp_path / "report.md"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr


def test_a_lost_node_fails_its_point_only_and_a_second_start_completes_it(cluster: Any, tmp_path: Path) -> None:
    points = {"here": (2, True, "host_a"), "lost": (2, True, "host_c")}
    node = cluster.add_node(num_cpus=1, object_store_memory=STORE, resources={"host_c": 1})
    cluster.wait_for_nodes()
    (tmp_path / "sweep.toml").write_text(sweep_text(points, gen_tokens=4000, time_scale=40))
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalkit", "sweep", "sweep.toml", "--out", "out", "--ray", cluster.address],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    running = tmp_path / "out" / "ray-truth" / "points" / "lost" / "point-state.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        running.is_file() and json.loads(running.read_text())["status"] == "running"
    ):
        time.sleep(0.2)
    assert running.is_file(), "the point never started on its node"
    time.sleep(1.0)  # its server is up and its command running
    pids = json.loads((running.parent / ".sweep-pids.json").read_text())
    server_pid = pids["server"]["pid"]
    cluster.remove_node(node)
    _, err = proc.communicate(timeout=300)
    # issue #56: the point's watchdog stops the server the lost task started, at once, not at the next sweep
    from evalkit.sweep.leftovers import start_time

    deadline = time.monotonic() + 30
    while start_time(server_pid) == pids["server"]["start_time"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert start_time(server_pid) != pids["server"]["start_time"], "the lost point's server still runs"
    print(f"\n{err[-1500:]}")
    assert proc.returncode == 1, err[-3000:]
    state = json.loads((tmp_path / "out" / "ray-truth" / "sweep-state.json").read_text())
    status = {pt["name"]: pt for pt in state["points"]}
    assert status["here"]["status"] == "done"
    assert status["lost"]["status"] == "failed" and "its Ray task died" in status["lost"]["failure"], status["lost"]
    # a node with that label comes back; the second start keeps the done point and re-runs the lost one
    cluster.add_node(num_cpus=1, object_store_memory=STORE, resources={"host_c": 1})
    cluster.wait_for_nodes()
    again = evalkit("sweep", "sweep.toml", "--out", "out", "--ray", cluster.address, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "point here: done earlier, kept" in again.stderr
    state = json.loads((tmp_path / "out" / "ray-truth" / "sweep-state.json").read_text())
    assert [pt["status"] for pt in state["points"]] == ["done", "done"]


def test_without_ray_the_flag_is_one_line(tmp_path: Path) -> None:
    """Ray made unimportable: a sweep without --ray never needs it; with --ray it is one line naming the extra."""
    (tmp_path / "sweep.toml").write_text(sweep_text(TRUTH))
    code = "import sys; sys.modules['ray'] = None; from evalkit.cli import main; sys.exit(main())"
    dry = subprocess.run(
        [sys.executable, "-c", code, "sweep", "sweep.toml", "--dry-run"], cwd=tmp_path, capture_output=True, text=True
    )
    assert dry.returncode == 0 and "(Ray resources {'host_a': 1.0})" in dry.stdout, dry.stderr
    p = subprocess.run(
        [sys.executable, "-c", code, "sweep", "sweep.toml", "--ray", "auto"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert (
        p.returncode == 2
        and p.stderr.strip() == "evalkit sweep: error: --ray needs Ray: pip install 'evalkit[cluster]'"
    ), p.stderr


def test_a_point_without_resources_is_refused_on_ray(tmp_path: Path) -> None:
    text = sweep_text(TRUTH).replace("resources = { host_a = 1 }\n", "")
    (tmp_path / "sweep.toml").write_text(text)
    p = evalkit("sweep", "sweep.toml", "--ray", "auto", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "name no resources" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
