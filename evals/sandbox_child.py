"""Runs inside the sandbox child: lock the process down, then differential-test one candidate program.

Started as `python -I sandbox_child.py JOBDIR` with a clean environment in a new session. Order matters:
read the job and import everything while still privileged, cut the network (a new, empty network namespace),
set resource limits, drop to a fresh unprivileged uid (so RLIMIT_NPROC is enforced and no file of the host's
user is writable), and only then run model-written code. The result goes to the saved stdout as one JSON line;
the candidate's own output is swallowed.

The comparison is evalplus 0.3.1's `unsafe_execute` (exact match, `atol` for floats, the `find_zero` oracle)
with its HumanEval/32 defect fixed: 0.3.1 `continue`s past the `find_zero` check without recording the input as
passed, so every answer to HumanEval/32, the canonical one included, fails (evalplus issue #253). Here a
`find_zero` output passes when |poly(xs, out)| <= atol and is recorded as passed.
"""

import copy
import ctypes
import io
import json
import math
import os
import resource
import signal
import sys
import time

# Modules model-written code commonly imports, loaded before the uid drop: the interpreter's own files live
# where the unprivileged uid may not be able to read them.
for _name in ("typing", "collections", "itertools", "functools", "heapq", "bisect", "string", "re", "hashlib",
              "fractions", "decimal", "statistics", "operator", "random", "datetime", "numpy", "array",
              "textwrap", "unicodedata", "dataclasses", "abc", "enum", "struct", "cmath", "numbers",
              "collections.abc", "encodings.utf_16", "encodings.utf_32", "encodings.latin_1", "encodings.ascii", "encodings.idna",
              "socket", "subprocess", "shutil", "pathlib", "contextlib", "traceback", "queue", "threading"):
    try:
        __import__(_name)
    except Exception:  # noqa: BLE001 - a missing optional module is fine
        pass

import numpy as np  # noqa: E402

CLONE_NEWNET = 0x40000000


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _lock_down(limits: dict) -> dict:
    notes = {}
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        notes["netns"] = libc.unshare(CLONE_NEWNET) == 0
    except Exception:  # noqa: BLE001
        notes["netns"] = False
    mem = int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CPU, (int(limits["cpu_s"]), int(limits["cpu_s"]) + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["fsize_bytes"]), int(limits["fsize_bytes"])))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_NPROC, (int(limits["nproc"]), int(limits["nproc"])))
    uid = limits.get("uid")
    if uid is not None and os.getuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    notes["uid"] = os.getuid()
    # Belt and braces when no network namespace could be made (not root): no sockets from Python.
    if not notes["netns"]:
        import socket

        def _no_socket(*a, **k):
            raise OSError("network disabled in the sandbox")

        socket.socket = _no_socket  # type: ignore[assignment]
        socket.create_connection = _no_socket  # type: ignore[assignment]
    return notes


def _poly(xs, x):
    return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def _is_floats(x) -> bool:
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    if isinstance(x, np.ndarray):
        return x.dtype == np.float64 or x.dtype == np.float32
    return False


def _same(entry_point, inp, out, exp, atol) -> bool:
    if entry_point == "find_zero":
        return abs(_poly(*inp, out)) <= atol
    if out == exp:
        return True
    if atol == 0 and _is_floats(exp):
        atol = 1e-6
    if atol == 0:
        return False
    if type(out) is not type(exp):
        return False
    if isinstance(exp, (list, tuple)) and len(out) != len(exp):
        return False
    return bool(np.allclose(out, exp, rtol=1e-07, atol=atol))


def _call_all(fn, inputs, limits_s):
    outs, times = [], []
    for inp, limit in zip(inputs, limits_s):
        signal.setitimer(signal.ITIMER_REAL, limit)
        t0 = time.perf_counter()
        try:
            outs.append(fn(*copy.deepcopy(inp)))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        times.append(time.perf_counter() - t0)
    return outs, times


def _check(fn, entry_point, inputs, expected, ref_times, atol, job) -> dict:
    passed = 0
    for i, inp in enumerate(inputs):
        limit = max(job["min_time_limit_s"], job["time_limit_factor"] * ref_times[i])
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            out = fn(*copy.deepcopy(inp))
            signal.setitimer(signal.ITIMER_REAL, 0)
            ok = _same(entry_point, inp, out, expected[i], atol)
        except _Timeout:
            return {"status": "timeout", "passed": passed, "total": len(inputs), "failed_input": i}
        except BaseException as e:  # noqa: BLE001 - the candidate's failure is data
            signal.setitimer(signal.ITIMER_REAL, 0)
            return {"status": "fail", "passed": passed, "total": len(inputs), "failed_input": i,
                    "error": f"{type(e).__name__}: {str(e)[:200]}"}
        if not ok:
            return {"status": "fail", "passed": passed, "total": len(inputs), "failed_input": i,
                    "error": "wrong output"}
        passed += 1
    return {"status": "pass", "passed": passed, "total": len(inputs)}


def main() -> None:
    jobdir = sys.argv[1]
    with open(os.path.join(jobdir, "job.json"), encoding="utf-8") as f:
        job = json.load(f)
    os.chdir(jobdir)
    signal.signal(signal.SIGALRM, _alarm)
    result_fd = os.dup(1)
    entry = job["entry_point"]
    result: dict = {}
    # Expected outputs first, from the trusted canonical solution, before any untrusted code exists here.
    gt_globals: dict = {}
    exec(job["reference"], gt_globals)
    ref = gt_globals[entry]
    expected, ref_times = {}, {}
    for split in ("base", "plus"):
        expected[split], ref_times[split] = _call_all(ref, job[split], [60.0] * len(job[split]))
    result["sandbox"] = _lock_down(job["limits"])
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = io.StringIO()
    sys.stdin = io.StringIO()
    cand: dict = {"__name__": "__main__"}
    try:
        signal.setitimer(signal.ITIMER_REAL, job["load_time_limit_s"])
        exec(compile(job["code"], "<answer>", "exec"), cand)
        signal.setitimer(signal.ITIMER_REAL, 0)
        fn = cand[entry]
    except BaseException as e:  # noqa: BLE001
        signal.setitimer(signal.ITIMER_REAL, 0)
        err = "load time limit" if isinstance(e, _Timeout) else f"{type(e).__name__}: {str(e)[:200]}"
        for split in ("base", "plus"):
            result[split] = {"status": "fail", "passed": 0, "total": len(job[split]), "error": f"loading: {err}"}
        os.write(result_fd, (json.dumps(result) + "\n").encode())
        os._exit(0)
    for split in ("base", "plus"):
        result[split] = _check(fn, entry, job[split], expected[split], ref_times[split], job["atol"], job)
    os.write(result_fd, (json.dumps(result) + "\n").encode())
    os._exit(0)


if __name__ == "__main__":
    main()
