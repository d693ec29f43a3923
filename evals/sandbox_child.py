"""Runs inside the sandbox: load one program, then call its entry point once per input the harness sends.

Started as `python -I sandbox_child.py` with the harness's two pipes as stdin and stdout and nothing else open.
It keeps the pipes on private descriptors and points 0, 1 and 2 at /dev/null, so the program's own output goes
nowhere. Messages are JSON lines:

    harness -> child   {"code", "entry_point", "limits", "uid", "unshare_net", "max_output_bytes", "site", "preload"}
    child -> harness   {"ready": true} | {"load_error": "..."}
    harness -> child   {"n": <nonce>, "args": <plain value>}       (one input at a time, after the last reply)
    child -> harness   {"n": <nonce>, "ok": true, "s": <seconds>, "out": <plain value>}
                     | {"n": <nonce>, "ok": false, "error": "..."}

The trusted reference worker alone also gets {"n", "load": <code>, "entry_point"} (the next task's program, in a
fresh namespace; it starts with no program) and {"n", "batch": [<args>, ...]} (every input at once).
The candidate's child holds neither the expected outputs nor any input beyond the current one, and nothing it says is a
verdict: the harness compares the outputs itself. Limits and the uid drop happen before the program is loaded.
Standard library only (plus `plain_values.py`, which sits beside this file).
"""

import json
import os
import resource
import sys
import time

CLONE_NEWNET = 0x40000000
_PRELOAD = (
    "typing",
    "collections",
    "itertools",
    "functools",
    "heapq",
    "bisect",
    "string",
    "re",
    "hashlib",
    "fractions",
    "decimal",
    "statistics",
    "operator",
    "random",
    "datetime",
    "numpy",
    "array",
    "textwrap",
    "unicodedata",
    "dataclasses",
    "abc",
    "enum",
    "struct",
    "cmath",
    "numbers",
    "collections.abc",
    "math",
    "copy",
    "signal",
    "time",
    "socket",
    "gc",
    "json",
    "subprocess",
    "shutil",
    "pathlib",
    "threading",
    "queue",
    "contextlib",
    "traceback",
    "encodings.utf_16",
    "encodings.utf_32",
    "encodings.latin_1",
    "encodings.ascii",
    "encodings.idna",
)


def _lock_down(init: dict) -> None:
    if init.get("unshare_net"):  # the unsafe mode's cut of the network (bubblewrap does it otherwise)
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET)
        except Exception:  # noqa: BLE001 - best effort: where the kernel refuses, the run goes on without it
            pass
    lim = init["limits"]
    resource.setrlimit(resource.RLIMIT_AS, (lim["memory_bytes"], lim["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu_s"], lim["cpu_s"] + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["fsize_bytes"], lim["fsize_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_NPROC, (lim["nproc"], lim["nproc"]))
    uid = init.get("uid")
    if uid is not None and os.getuid() == 0:
        # A fresh uid of its own: RLIMIT_NPROC counts only this job's processes, and every capability is gone.
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def _load(code: str, entry_point: str):
    scope: dict = {"__name__": "__main__"}
    exec(compile(code, "<answer>", "exec"), scope)
    return scope[entry_point]


def _error_text(e: BaseException) -> str:
    try:
        return f"{type(e).__name__}: {str(e)[:200]}"
    except BaseException:  # noqa: BLE001 - a __str__ that raises is the program's business
        return type(e).__name__


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import plain_values as pv

    reader = os.fdopen(os.dup(0), "rb")
    writer = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the process's own stdio, open until it exits
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - as above

    def send(text: str) -> None:
        writer.write(text.encode("utf-8", "surrogatepass") + b"\n")
        writer.flush()

    init = json.loads(reader.readline())
    if init.get("site"):
        sys.path.insert(0, init["site"])
    max_out = int(init["max_output_bytes"])
    if init.get("preload"):
        # Without bubblewrap the fresh uid may not read the interpreter's files: load what programs import first.
        for name in _PRELOAD:
            try:
                __import__(name)
            except Exception:  # noqa: BLE001 - a missing optional module is fine
                pass
    _lock_down(init)
    fn = None
    if init["code"] is not None:
        try:
            fn = _load(init["code"], init["entry_point"])
        except BaseException as e:  # noqa: BLE001 - the program's failure is data
            send(json.dumps({"load_error": _error_text(e)}))
            os._exit(0)
    send('{"ready":true}')
    while True:
        line = reader.readline()
        if not line:
            os._exit(0)
        msg = json.loads(line)
        nonce = int(msg["n"])
        if "load" in msg:  # the trusted reference worker only: the next task's program, in a fresh namespace
            try:
                fn = _load(msg["load"], msg["entry_point"])
                send(json.dumps({"n": nonce, "ok": True}))
            except BaseException as e:  # noqa: BLE001 - the program's failure is data
                send(json.dumps({"n": nonce, "ok": False, "error": _error_text(e)}))
            continue
        if "batch" in msg:  # the trusted reference only: every input in one message, every output in one reply
            _batch(fn, nonce, msg["batch"], max_out, send, pv)
            continue
        args = pv.decode_obj(msg["args"])
        t0 = time.perf_counter()
        try:
            out = fn(*args)
        except BaseException as e:  # noqa: BLE001 - the program's failure is data
            send(json.dumps({"n": nonce, "ok": False, "error": _error_text(e)}))
            continue
        seconds = time.perf_counter() - t0
        try:
            text = pv.encode(out, max_out)
        except pv.NotPlain as e:
            send(json.dumps({"n": nonce, "ok": False, "error": f"output is not a plain value: {e}"}))
            continue
        except BaseException as e:  # noqa: BLE001 - a proxy that raises when looked at
            send(json.dumps({"n": nonce, "ok": False, "error": f"output is not a plain value: {_error_text(e)}"}))
            continue
        send(f'{{"n":{nonce},"ok":true,"s":{seconds!r},"out":{text}}}')


def _batch(fn, nonce, batch, max_out, send, pv) -> None:
    outs, times = [], []
    for i, tree in enumerate(batch):
        args = pv.decode_obj(tree)
        t0 = time.perf_counter()
        try:
            out = fn(*args)
            times.append(time.perf_counter() - t0)
            outs.append(pv.to_tree(out))
        except BaseException as e:  # noqa: BLE001 - the program's failure is data
            send(json.dumps({"n": nonce, "ok": False, "error": f"input {i}: {_error_text(e)}"}))
            return
    text = json.dumps({"n": nonce, "ok": True, "s": times, "outs": outs}, check_circular=False, separators=(",", ":"))
    if len(text) > max_out:
        send(json.dumps({"n": nonce, "ok": False, "error": f"outputs larger than {max_out} bytes"}))
        return
    send(text)


if __name__ == "__main__":
    main()
