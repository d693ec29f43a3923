"""A Ray point's watchdog (issue #56): when the task's worker process dies (its node lost), the server and command
the point's pid file names are stopped at once, not left running until the next sweep on the directory. Real
processes: a stand-in worker, a server in its own process group, the watchdog as the Ray task starts it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from evalkit.sweep.leftovers import remember, start_time


def _gone(pid: int, started: str | None, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while start_time(pid) == started and time.monotonic() < deadline:
        time.sleep(0.05)
    return start_time(pid) != started


def test_the_watchdog_stops_the_points_server_when_its_worker_dies(tmp_path: Path) -> None:
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    remember(tmp_path, "server", server.pid, ["a-server"], group=True)
    # the task's worker: a process that starts the watchdog for itself, then waits to be killed
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from evalkit.sweep.ray_runner import _watchdog; "
            "g = _watchdog(Path(sys.argv[1]), 5.0); print(g.pid, flush=True); time.sleep(600)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        dog = int(worker.stdout.readline())
        time.sleep(1.0)
        assert server.poll() is None, "the server stopped while its worker lived"
        worker.kill()  # as Ray's raylet does when the node is lost
        worker.wait()
        assert server.wait(timeout=15) is not None, "the server outlived its worker"
        assert _gone(dog, start_time(dog), 10), "the watchdog did not end"
        assert not (tmp_path / ".sweep-pids.json").exists()
    finally:
        for p in (server, worker):
            if p.poll() is None:
                p.kill()
                p.wait()
