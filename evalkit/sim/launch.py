"""Start `evalkit sim` as a subprocess and talk to its ground-truth endpoints (for tests, benchmarks and demo).

with start_sim(["--time-scale", "50"]) as sim:
    client = ChatClient(sim.base_url, "evalkit-sim")
    ...
    events = sim.events()
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from evalkit.addresses import server_root
from evalkit.clock import ANCHOR_ENV, Clock
from evalkit.sim.settings import SimConfig
from evalkit.sim.trace import SimEvent

LISTEN_PREFIX = "evalkit sim listening on "


class SimStartError(RuntimeError):
    """The sim did not come up."""


class SimProcess:
    """A running `evalkit sim` subprocess."""

    def __init__(self, proc: subprocess.Popen[str], base_url: str, stderr_path: Path) -> None:
        self.proc = proc
        self.base_url = base_url
        self.root_url = server_root(base_url)
        self._stderr_path = stderr_path

    @property
    def port(self) -> int:
        """The port the sim listens on."""
        return int(self.root_url.rsplit(":", 1)[1])

    def _get(self, path: str, method: str = "GET", timeout: float = 10.0) -> Any:
        req = urllib.request.Request(
            self.root_url + path,
            method=method,
            data=b"{}" if method == "POST" else None,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def events(self, wait_s: float = 10.0) -> list[SimEvent]:
        """The sim's events; waits up to `wait_s` for every request to end (status no longer `running`)."""
        deadline = time.monotonic() + wait_s
        while True:
            evs: list[SimEvent] = self._get("/sim/events")["events"]
            if all(e["status"] != "running" for e in evs) or time.monotonic() > deadline:
                return evs
            time.sleep(0.02)

    def event(self, request_id: str, wait_s: float = 10.0) -> SimEvent:
        """The event of one request id (raises KeyError when the sim never saw it)."""
        for e in self.events(wait_s):
            if e["request_id"] == request_id:
                return e
        raise KeyError(request_id)

    def reset(self) -> None:
        """Clear the sim's events."""
        self._get("/sim/reset", method="POST")

    def config(self) -> SimConfig:
        """The engine's settings."""
        settings: SimConfig = self._get("/sim/config")
        return settings

    def stderr_text(self) -> str:
        """Everything the sim wrote to stderr so far."""
        return self._stderr_path.read_text(errors="replace")

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        try:
            self._stderr_path.unlink()
        except OSError:
            pass
        return self.proc.returncode

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_sim(
    flags: list[str] | tuple[str, ...] = (),
    data_dir: str | Path | None = None,
    timeout: float = 30.0,
    python: str | None = None,
    clock: Clock | None = None,
) -> SimProcess:
    """Start `evalkit sim --port 0 FLAGS` (as `python -m evalkit.sim`), wait for its listening line and `/health`.

    With `clock`, the sim stamps on that clock (same anchor): its `arrived` and the caller's `t_sent` then compare
    to the nanosecond, not to the few microseconds two separately anchored clocks agree to."""
    # `-m evalkit.sim` runs the same command as `-m evalkit sim` but skips importing every other command.
    cmd = [python or sys.executable, "-m", "evalkit.sim", "--host", "127.0.0.1", "--port", "0", *flags]
    if data_dir is not None and "--data-dir" not in flags:
        cmd += ["--data-dir", str(data_dir)]
    fd, err_name = tempfile.mkstemp(prefix="evalkit-sim-", suffix=".stderr")
    err_path = Path(err_name)
    with os.fdopen(fd, "w") as err:
        env = None if clock is None else {**os.environ, ANCHOR_ENV: clock.anchor_text}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline()
            break
        if proc.poll() is not None:
            break
    if not line.startswith(LISTEN_PREFIX):
        proc.kill()
        proc.wait()
        msg = err_path.read_text(errors="replace").strip()
        err_path.unlink(missing_ok=True)
        raise SimStartError(f"evalkit sim did not start: {line.strip() or msg or 'no output'}")
    sim = SimProcess(proc, line[len(LISTEN_PREFIX) :].strip(), err_path)
    while time.monotonic() < deadline:
        try:
            if sim._get("/health", timeout=1.0).get("status") == "ok":
                return sim
        except OSError:
            time.sleep(0.05)
    sim.stop()
    raise SimStartError("evalkit sim did not answer /health")
