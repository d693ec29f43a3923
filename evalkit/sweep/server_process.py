"""One server process of a sweep point: started in its own session (process group) with its output in a log file,
waited on until its health URL answers 200, and stopped by group (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalkit.redact import scrub

TAIL_LINES = 15


class ServerStartError(RuntimeError):
    """The server did not become healthy: `reason` is one line, `tail` the log's last lines."""

    def __init__(self, reason: str, tail: list[str]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.tail = tail


def log_tail(path: Path, n: int = TAIL_LINES) -> list[str]:
    """The last `n` lines of a log file, scrubbed of credentials (empty when there is no file)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [scrub(ln) for ln in lines[-n:]]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
        return False  # 503 while loading the model, refused before it listens


@dataclass
class ServerProcess:
    """A running server: its process (the leader of its own group), the command, its log and its URLs."""

    process: subprocess.Popen[bytes]
    command: list[str]
    log_path: Path
    root_url: str
    startup_s: float = 0.0

    @property
    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.process.poll() is None

    def tail(self) -> list[str]:
        """The log's last lines."""
        return log_tail(self.log_path)

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after `timeout_s`; the exit code (negative: the signal)."""
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=timeout_s)
        else:
            _signal_group(self.process.pid, signal.SIGKILL)  # children the leader left behind
        return self.process.returncode


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)  # started with start_new_session: its process group id is its pid
    except (ProcessLookupError, PermissionError):
        pass


def start_server(
    command: list[str],
    root_url: str,
    health_path: str,
    log_path: Path,
    start_timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    stop_timeout_s: float = 15.0,
    server_log: Path | None = None,
    on_started: Callable[[int], None] | None = None,
) -> ServerProcess:
    """Start `command` and return once GET `root_url + health_path` answers 200; raise ServerStartError with the
    log's last lines when the process exits first or `start_timeout_s` passes. `server_log` is the log the server
    writes itself, when it is not its output; `on_started(pid)` is called as soon as the process exists."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **(env or {})},
                cwd=cwd,
            )
        except OSError as e:
            raise ServerStartError(f"cannot start {command[0]!r}: {e.strerror or e}", []) from None
    if on_started is not None:
        on_started(proc.pid)
    server = ServerProcess(proc, command, log_path, root_url.rstrip("/"))
    url = server.root_url + (health_path if health_path.startswith("/") else "/" + health_path)
    while time.monotonic() - start < start_timeout_s:
        if proc.poll() is not None:
            break
        if _healthy(url):
            server.startup_s = time.monotonic() - start
            return server
        time.sleep(0.1)
    exited = proc.poll() is not None
    code = server.stop(stop_timeout_s)
    tail = log_tail(log_path) + (log_tail(server_log) if server_log and server_log != log_path else [])
    if exited:
        reason = f"the server exited with code {code} before {url} answered 200"
    else:
        reason = f"{url} did not answer 200 within {start_timeout_s:g} s (stopped, exit {code})"
    raise ServerStartError(reason, tail)
