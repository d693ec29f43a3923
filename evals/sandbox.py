"""A sandboxed worker: one child process (under bubblewrap, see `isolation.py`) that holds one program and calls
its entry point on each input the harness hands it, answering with a plain value (`plain_values.py`).

The worker's only channel is the pair of pipes the harness made; replies are matched to a fresh random nonce per
input, read with a deadline and a size limit, and decoded into fresh builtins. A child that dies, hangs, answers
out of turn or sends anything malformed gives `died`, `timeout` or `bad_reply`: never an output. At `close` the
child's whole process tree is killed (its PID namespace under bubblewrap; its uid when evalkit runs as root).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalkit_evals import plain_values
from evalkit_evals.isolation import Isolation

if TYPE_CHECKING:
    from evalkit_evals.sandbox_child import ChildInit

_CHUNK = 1 << 20
_F_SETPIPE_SZ = 1031
_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one program. Time limits are generous: a loaded machine must not fail correct code."""

    cpu_s: int = 60
    wall_s: float = 120.0
    memory_bytes: int = 4 * 1024**3  # the whole sandbox's: each of its `nproc` processes gets this / nproc
    nproc: int = 4
    fsize_bytes: int = 64 * 1024**2
    output_bytes: int = 32 * 1024**2  # one output's encoded size (HumanEval/130's largest is 12 MB)
    load_s: float = 10.0


@dataclass(frozen=True)
class Reply:
    """One call's outcome: `ok` (with `value`), `raised` (the program raised), `timeout`, `died`, `bad_reply`."""

    status: str
    value: Any = None
    error: str | None = None
    seconds: Any = None  # one call: float; a batch: a list of floats


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
        if fields.get("State", "").strip()[:1] in ("Z", "X"):
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            pids.append(int(entry))
    return pids


def _kill_uid(uid: int) -> None:
    for _ in range(100):
        pids = uid_processes(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


class Worker:
    """One program in one sandboxed child. Use as a context manager; `start`, then `call` once per input."""

    def __init__(self, code: str | None, entry_point: str | None, isolation: Isolation, limits: SandboxLimits) -> None:
        self.code, self.entry_point, self.isolation, self.limits = code, entry_point, isolation, limits
        self.uid = 1_000_000 + secrets.randbelow(1_000_000_000) if os.getuid() == 0 else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = bytearray()  # bytes read and not yet returned as a line
        self._scanned = 0  # how much of it holds no line break (a big answer is searched once, not per read)
        self._workdir: str | None = None
        self.alive = False

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> str | None:
        """Start the child and load the program; None when it is ready, else why not (a load error, a limit)."""
        self._workdir = tempfile.mkdtemp(prefix="evalkit-sandbox-")
        if self.uid is not None:
            os.chown(self._workdir, self.uid, self.uid)
        os.chmod(self._workdir, 0o700)
        argv, env = self.isolation.argv()
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 - the child's stderr for its whole life; close() ends it
        # A clean environment for bubblewrap too: its own processes' environment must not hold the API key.
        self._proc = subprocess.Popen(
            argv,
            cwd=self._workdir,
            env=env or _bare_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            start_new_session=True,
            close_fds=True,
        )
        for fd in (self._proc.stdin.fileno(), self._proc.stdout.fileno()):  # type: ignore[union-attr]  # both pipes were asked for, so neither is None
            os.set_blocking(fd, False)
            try:  # a bigger pipe: fewer wake-ups for a large input or output
                fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)
            except OSError:
                pass
        self.alive = True
        lim = self.limits
        init: ChildInit = {
            "code": self.code,
            "entry_point": self.entry_point,
            "uid": self.uid,
            "unshare_net": not self.isolation.isolated and os.getuid() == 0,
            "max_output_bytes": lim.output_bytes,
            "preload": not self.isolation.isolated,
            "site": self.isolation.site(),
            "limits": {
                "cpu_s": lim.cpu_s,
                "memory_bytes": lim.memory_bytes,
                "nproc": lim.nproc,
                "fsize_bytes": lim.fsize_bytes,
            },
        }
        got = self._exchange(json.dumps(init).encode() + b"\n", time.monotonic() + lim.load_s)
        if isinstance(got, str):
            why = {
                "timeout": "load time limit",
                "died": f"the program ended while loading{self._stderr()}",
                "bad_reply": "malformed answer while loading",
            }[got]
            self.close()
            return why
        try:
            msg = json.loads(got)
        except ValueError:
            msg = None
        if msg == {"ready": True}:
            return None
        self.close()
        if isinstance(msg, dict) and isinstance(msg.get("load_error"), str) and len(msg) == 1:
            return f"loading: {msg['load_error'][:300]}"
        return "malformed answer while loading"

    def call(self, args: Any, timeout_s: float, cpu_s: float | None = None) -> Reply:
        """Call the entry point on `args` (a tuple of plain values); a failed call leaves the worker closed
        unless the program merely raised or returned something not plain.

        With `cpu_s`, the time limit is the CPU time the sandbox's processes spend on the call, and `timeout_s` is
        only the wall-clock backstop (a program that sleeps or blocks): a busy machine that runs the program at a
        fraction of a core does not fail correct code, and a program cannot buy itself time (the parent counts the
        CPU, from /proc, outside the sandbox)."""
        if not self.alive:
            return Reply("died", error="the worker is not running")
        nonce = secrets.randbits(62)
        request = (
            json.dumps({"n": nonce, "args": plain_values.to_tree(list(args))}, separators=(",", ":")).encode() + b"\n"
        )
        start = time.monotonic()
        pid = self._proc.pid if self._proc is not None else None
        cpu0 = _tree_cpu_s(pid) if cpu_s is not None and pid is not None else 0.0
        why = ["time limit"]

        def extend() -> float | None:
            # Past the CPU limit on the wall clock: more time while the program has not used its CPU time.
            if cpu_s is None or pid is None:
                return None
            now, used = time.monotonic(), _tree_cpu_s(pid) - cpu0
            if used >= cpu_s:
                return None
            if now - start >= timeout_s:
                why[0] = f"wall-clock limit ({used:.3g} s of CPU in {now - start:.3g} s: it sleeps or blocks)"
                return None
            return min(start + timeout_s, now + max(0.05, cpu_s - used))

        first = start + (min(cpu_s, timeout_s) if cpu_s is not None else timeout_s)
        got = self._exchange(request, first, extend)
        if isinstance(got, str):
            self.close()
            return Reply(
                got,
                error={
                    "timeout": why[0],
                    "died": "the program ended",
                    "bad_reply": "answer larger than the output limit",
                }[got],
            )
        reply = self._parse(got, nonce)
        if reply.status == "bad_reply":
            self.close()
        return reply

    def load(self, code: str, entry_point: str, timeout_s: float) -> Reply:
        """Replace the program (for the trusted reference worker only, which serves one task after another)."""
        nonce = secrets.randbits(62)
        got = self._exchange(
            json.dumps({"n": nonce, "load": code, "entry_point": entry_point}).encode() + b"\n",
            time.monotonic() + timeout_s,
        )
        if isinstance(got, str):
            self.close()
            return Reply(got, error=got)
        msg = json.loads(got)
        return Reply("ok") if msg.get("ok") else Reply("raised", error=str(msg.get("error"))[:300])

    def call_batch(self, inputs: list[Any], timeout_s: float) -> Reply:
        """Call the entry point on every input in one exchange (for the trusted reference only: a candidate
        gets one input at a time); `value` is the list of outputs, `seconds` the list of call times."""
        nonce = secrets.randbits(62)
        request = (
            json.dumps(
                {"n": nonce, "batch": [plain_values.to_tree(list(a)) for a in inputs]}, separators=(",", ":")
            ).encode()
            + b"\n"
        )
        got = self._exchange(request, time.monotonic() + timeout_s)
        if isinstance(got, str):
            self.close()
            return Reply(got, error=got)
        try:
            msg = json.loads(got)
            if msg.get("n") != nonce:
                return Reply("bad_reply", error="answer out of turn")
            if not msg["ok"]:
                return Reply("raised", error=str(msg["error"])[:300])
            return Reply("ok", value=[plain_values.decode_obj(o) for o in msg["outs"]], seconds=msg["s"])
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            return Reply("bad_reply", error=f"malformed answer ({type(e).__name__})")

    def _parse(self, line: bytes, nonce: int) -> Reply:
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return Reply("bad_reply", error="malformed answer")
        if type(msg) is not dict or msg.get("n") != nonce or type(msg.get("n")) is not int:
            return Reply("bad_reply", error="answer out of turn")
        if msg.get("ok") is False and set(msg) == {"n", "ok", "error"} and type(msg["error"]) is str:
            return Reply("raised", error=msg["error"][:300])
        seconds = msg.get("s")
        if msg.get("ok") is not True or set(msg) != {"n", "ok", "s", "out"} or type(seconds) is not float:
            return Reply("bad_reply", error="malformed answer")
        try:
            value = plain_values.decode_obj(msg["out"])
        except plain_values.NotPlain as e:
            return Reply("bad_reply", error=str(e))
        return Reply("ok", value=value, seconds=seconds)

    def _exchange(self, data: bytes, deadline: float, extend: Callable[[], float | None] | None = None) -> bytes | str:
        # Write the request and read one line back, both without blocking past the deadline (which `extend`, when
        # given, may move: it returns the new one, or None for none); the line may not exceed the output limit
        # (plus room for the envelope).
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        wfd, rfd = proc.stdin.fileno(), proc.stdout.fileno()
        limit = self.limits.output_bytes + 4096
        view = memoryview(data)
        try:  # most requests fit the pipe: write at once, without a select first
            view = view[os.write(wfd, view[:_CHUNK]) :]
        except BlockingIOError:
            pass
        except BrokenPipeError:
            return "died"
        while True:
            nl = self._buf.find(b"\n", self._scanned)
            self._scanned = len(self._buf) if nl < 0 else nl
            if nl >= 0 and not view:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                self._scanned = 0
                return line
            if len(self._buf) > limit:
                return "bad_reply"
            left = deadline - time.monotonic()
            if left <= 0:
                later = extend() if extend is not None else None
                if later is None:
                    return "timeout"
                deadline, left = later, later - time.monotonic()
            rl, wl, _ = select.select([rfd], [wfd] if view else [], [], left)
            if wl:
                try:
                    view = view[os.write(wfd, view[:_CHUNK]) :]
                except BrokenPipeError:
                    return "died"
                except BlockingIOError:
                    pass
            if rl:
                try:
                    chunk = os.read(rfd, _CHUNK * 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    return "died"
                self._buf += chunk

    def _stderr(self) -> str:
        try:
            self._err.seek(0)
            tail = self._err.read()[-300:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return f" ({' '.join(tail.split())})" if tail else ""

    def close(self) -> None:
        """Kill the child and everything it started; remove its working directory."""
        self.alive = False
        proc = self._proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            if self.uid is not None:
                _kill_uid(self.uid)
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                try:
                    f.close()  # type: ignore[union-attr]  # a None pipe raises AttributeError, caught below
                except (OSError, AttributeError):
                    pass
            self._proc = None
            self._err.close()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds (user and system, with reaped children's) of process `pid` and all its descendants, from /proc:
    only this process tree is read."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2 :].split()
            total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / _CLK_TCK  # utime stime cutime cstime
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(x) for x in f.read().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


def _bare_env() -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
