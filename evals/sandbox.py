"""Running model-written code: a child process with CPU, wall-clock, memory, process and file-size limits, no
network, a throw-away working directory, a clean environment (no API keys) and, when evalkit runs as root, a
fresh unprivileged uid of its own. Whatever the code does, only its own job fails.

The child (`sandbox_child.py`) locks itself down before it loads the untrusted code. Afterwards every process
still running under the job's uid (a fork bomb's survivors, a daemon that called setsid) and the job's process
group are killed, and the directory is removed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CHILD = Path(__file__).with_name("sandbox_child.py")


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one job. Time limits are generous: a loaded machine must not fail correct code."""

    cpu_s: int = 60
    wall_s: float = 120.0
    memory_bytes: int = 4 * 1024**3
    nproc: int = 8
    fsize_bytes: int = 64 * 1024**2


@dataclass(frozen=True)
class SandboxResult:
    """What came back: the child's JSON result, or why there is none."""

    result: dict[str, Any] | None
    returncode: int | None
    timed_out: bool
    stderr: str = ""
    notes: dict[str, Any] = field(default_factory=dict)


def _clean_env(home: str) -> dict[str, str]:
    # Nothing is inherited: no API keys, no proxies, no PYTHONPATH.
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def uid_processes(uid: int) -> list[int]:
    """Live (not zombie) processes whose real uid is `uid`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="utf-8") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        # A killed process waits as a zombie until its (new) parent reaps it; it no longer runs.
        if fields.get("State", "").strip()[:1] in ("Z", "X"):
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            pids.append(int(entry))
    return pids


def _kill_job(pgid: int, uid: int | None) -> None:
    # Kill the process group, then everything under the job's own uid, until nothing of it is left.
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
    if uid is None:
        return
    for _ in range(50):
        pids = uid_processes(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def run_job(job: dict[str, Any], limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run one differential-testing job (see `sandbox_child.py`) in a fresh sandbox."""
    root = os.getuid() == 0
    uid = 1_000_000 + secrets.randbelow(1_000_000_000) if root else None
    workdir = tempfile.mkdtemp(prefix="evalkit-sandbox-")
    try:
        payload = dict(job)
        payload["limits"] = {"cpu_s": limits.cpu_s, "memory_bytes": limits.memory_bytes,
                             "nproc": limits.nproc, "fsize_bytes": limits.fsize_bytes, "uid": uid}
        (Path(workdir) / "job.json").write_text(json.dumps(payload), encoding="utf-8")
        if uid is not None:
            os.chown(workdir, uid, uid)
        os.chmod(workdir, 0o700)
        # Output goes to files, not pipes: a forked survivor holding a pipe open would stall the reader.
        with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
            proc = subprocess.Popen(
                [sys.executable, "-I", str(_CHILD), workdir],
                cwd=workdir, env=_clean_env(workdir), stdin=subprocess.DEVNULL,
                stdout=out_f, stderr=err_f, start_new_session=True, close_fds=True,
            )
            timed_out = False
            try:
                proc.wait(timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            _kill_job(proc.pid, uid)
            proc.wait()
            out_f.seek(0)
            err_f.seek(0)
            out, err = out_f.read(), err_f.read()
        result = None
        for line in out.decode("utf-8", "replace").splitlines()[::-1]:
            try:
                result = json.loads(line)
                break
            except ValueError:
                continue
        return SandboxResult(result, proc.returncode, timed_out, err.decode("utf-8", "replace")[-2000:])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
