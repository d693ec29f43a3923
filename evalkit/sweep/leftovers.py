"""What a killed sweep leaves running: its point's server (a GPU held) and the evalkit command it ran. Each is named
in `SWEEP/.sweep-pids.json` while it runs (pid, process-group leader or not, start time, argv); the next sweep on
the directory stops whatever that file still names before it resumes, after checking that the pid is still the same
process (its start time), so a reused pid is never signalled. The server is stopped by its process group (it
runs in its own session), so its children go with it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

PIDS = ".sweep-pids.json"


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None when it is gone (or a
    zombie) or there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: count fields after its closing one
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _read(sweep_dir: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads((sweep_dir / PIDS).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _write(sweep_dir: Path, data: dict[str, dict[str, object]]) -> None:
    path = sweep_dir / PIDS
    if not data:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def remember(sweep_dir: Path, role: str, pid: int, argv: list[str], group: bool) -> None:
    """Name a running process (`role`: server or command) in the pid file; `group`: it leads its own group."""
    data = _read(sweep_dir)
    data[role] = {"pid": pid, "group": group, "start_time": start_time(pid), "argv": argv}
    _write(sweep_dir, data)


def forget(sweep_dir: Path, role: str) -> None:
    """The process is stopped: drop it from the pid file."""
    data = _read(sweep_dir)
    if data.pop(role, None) is not None:
        _write(sweep_dir, data)


def _same(entry: dict[str, object]) -> bool:
    # pid and start time (in clock ticks) name one process: a reused pid starts later. The command line is not
    # compared: a server started through a script or a shell that execs shows another one.
    pid = entry.get("pid")
    if not isinstance(pid, int) or pid <= 1 or entry.get("start_time") is None:
        return False
    return start_time(pid) == entry["start_time"]


def stop_leftovers(sweep_dir: Path, say: Callable[[str], None], timeout_s: float = 15.0) -> list[str]:
    """Stop every process the pid file names that is still the one recorded (SIGTERM, SIGKILL after `timeout_s`);
    the roles stopped. The file is removed."""
    stopped = []
    # the command first: stopping its server under it would write failed requests into its run
    for role, entry in sorted(_read(sweep_dir).items(), key=lambda kv: kv[0] != "command"):
        if not _same(entry):
            continue
        pid = int(entry["pid"])  # type: ignore[call-overload]  # checked an int by _same
        kill: Callable[[int, int], None] = os.killpg if entry.get("group") else os.kill
        say(f"a killed sweep left its {role} running (pid {pid}): stopping it")
        try:
            kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while start_time(pid) == entry["start_time"] and time.monotonic() < deadline:
                time.sleep(0.1)
            if start_time(pid) == entry["start_time"]:
                kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        stopped.append(role)
    _write(sweep_dir, {})
    return stopped
