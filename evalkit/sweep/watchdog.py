"""A point's watchdog on a Ray node (issue #56): `python -m evalkit.sweep.watchdog PID START POINT_DIR STOP_S`.

A point's Ray task starts it in a session of its own beside the point's server and command. When the task's worker
process ends without having stopped it (its node lost, the worker killed), the watchdog stops what the point's pid
file still names (`leftovers.stop_leftovers`): the server does not run on until the next sweep there. A task that
ends as it should stops the watchdog first.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from evalkit.sweep.leftovers import start_time, stop_leftovers

POLL_S = 0.5


def watch(pid: int, started: str, point_dir: Path, stop_timeout_s: float) -> None:
    """Wait while process `pid` (started at `started`, in clock ticks) lives; then stop the point's leftovers."""
    while start_time(pid) == started:
        time.sleep(POLL_S)
    stop_leftovers(point_dir, lambda text: None, stop_timeout_s)


def main(argv: list[str]) -> int:
    """Entry point."""
    pid, started, point_dir, stop_s = argv
    watch(int(pid), started, Path(point_dir), float(stop_s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
