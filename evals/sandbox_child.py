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

from __future__ import annotations

import json
import os
import platform
import resource
import struct
import sys
import time
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

CLONE_NEWNET = 0x40000000
# Every namespace flag of clone(2) (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET): refused, so
# no program makes a user namespace (and in it a private tmpfs outside every limit: `unshare -r -m`).
_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_EPERM, _ENOSYS = 1, 38
# machine -> (its audit arch, clone's number, {syscall number: errno}); the mount API's numbers (428-442) and
# clone3's (435) are the same on both. clone3 answers ENOSYS: its flags sit in memory a filter cannot read, and
# glibc then falls back to clone, whose flags it can.
# Memory no RLIMIT_AS counts is refused too (issue #56): memfd_create and memfd_secret (anonymous files held by a
# descriptor: 64 of them at RLIMIT_FSIZE each, unmapped, took 3 GB under a 1 GB limit), SysV shared memory and
# message queues (segments outlive their mapping inside the IPC namespace). POSIX queues: RLIMIT_MSGQUEUE 0.
_SECCOMP = {
    "x86_64": (
        0xC000003E,
        56,
        {272: _EPERM, 308: _EPERM, 165: _EPERM, 166: _EPERM, 155: _EPERM}
        | {319: _EPERM, 447: _EPERM, 29: _EPERM, 68: _EPERM},  # memfd_create, memfd_secret, shmget, msgget
    ),
    "aarch64": (
        0xC00000B7,
        220,
        {97: _EPERM, 268: _EPERM, 40: _EPERM, 39: _EPERM, 41: _EPERM}
        | {279: _EPERM, 447: _EPERM, 194: _EPERM, 186: _EPERM},  # memfd_create, memfd_secret, shmget, msgget
    ),
}
_NEW_MOUNT_API = {428: _EPERM, 429: _EPERM, 430: _EPERM, 431: _EPERM, 432: _EPERM, 433: _EPERM, 442: _EPERM}
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


class ChildLimits(TypedDict):
    """The limits the child sets on itself (`sandbox.SandboxLimits`'s)."""

    cpu_s: int
    memory_bytes: int
    nproc: int
    fsize_bytes: int


class ChildInit(TypedDict):
    """The first line the parent sends (`sandbox.Worker.start`): the program and its entry point (None: a reference
    worker, loaded later), the uid to drop to, whether to cut the network itself, the output bound, whether to
    preload (unsafe mode), numpy's site directory, and the limits."""

    code: str | None
    entry_point: str | None
    uid: int | None
    unshare_net: bool
    max_output_bytes: int
    preload: bool
    site: str | None
    limits: ChildLimits


def _lock_down(init: ChildInit) -> None:
    import ctypes  # loaded before the memory limit: the seccomp filter is installed through it

    if init.get("unshare_net"):  # the unsafe mode's cut of the network (bubblewrap does it otherwise)
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET)
        except Exception:  # noqa: BLE001 - best effort: where the kernel refuses, the run goes on without it
            pass
    lim = init["limits"]
    # One memory limit for the whole sandbox: at most `nproc` processes (threads included), each with its share
    # of the address space, so all of them together never hold more than `memory_bytes`.
    per_process = lim["memory_bytes"] // max(1, lim["nproc"])
    resource.setrlimit(resource.RLIMIT_AS, (per_process, per_process))
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu_s"], lim["cpu_s"] + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["fsize_bytes"], lim["fsize_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_NPROC, (lim["nproc"], lim["nproc"]))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    uid = init.get("uid")
    if uid is not None and os.getuid() == 0:
        # A fresh uid of its own: RLIMIT_NPROC counts only this job's processes, and every capability is gone.
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    _no_namespaces()


def _no_namespaces() -> None:
    """A seccomp filter (kept across fork and exec): no new namespaces (unshare, setns, clone with a namespace
    flag) and no mounts; raises where this machine has no filter here (the sandbox then refuses to run code)."""
    import ctypes

    machine = platform.machine()
    if machine not in _SECCOMP:
        raise OSError(f"no seccomp filter for {machine}")
    arch, clone, refused = _SECCOMP[machine]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, JMP|JEQ/JGE/JSET|K, RET|K
    allow, errno = 0x7FFF0000, 0x00050000
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, errno | _EPERM), (ld, 0, 0, 0)]
    if machine == "x86_64":  # the x32 ABI's numbers (bit 30 set) are another way into the same calls
        prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, errno | _EPERM)]
    for nr, err in sorted({**refused, **_NEW_MOUNT_API, 435: _ENOSYS}.items()):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, errno | err)]
    # clone: the low word of its first argument (the flags) must hold no namespace flag.
    prog += [(jeq, 1, 0, clone), (ret, 0, 0, allow), (ld, 0, 0, 16), (jset, 0, 1, _NS_FLAGS)]
    prog += [(ret, 0, 0, errno | _EPERM), (ret, 0, 0, allow)]
    code = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(code)

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Prog(len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # NO_NEW_PRIVS, SECCOMP
        raise OSError(ctypes.get_errno(), "cannot install the seccomp filter")


def _load(code: str, entry_point: str) -> Any:
    scope: dict[str, Any] = {"__name__": "__main__"}
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
    if TYPE_CHECKING:  # the same file, under the name the harness's side imports it by
        from evalkit_evals import plain_values as pv
    else:
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

    init: ChildInit = json.loads(reader.readline())
    site = init.get("site")
    if site:
        sys.path.insert(0, site)
    max_out = int(init["max_output_bytes"])
    if init.get("preload"):
        # Without bubblewrap the fresh uid may not read the interpreter's files: load what programs import first.
        for name in _PRELOAD:
            try:
                __import__(name)
            except Exception:  # noqa: BLE001 - a missing optional module is fine
                pass
    try:
        _lock_down(init)
    except OSError as e:  # no filter here: refuse to run the program rather than run it with namespaces open
        send(json.dumps({"load_error": f"sandbox: {e}"}))
        os._exit(0)
    fn: Any = None  # the program's entry point: whatever it defined under that name, or None until one is loaded
    if init["code"] is not None:
        try:
            fn = _load(init["code"], str(init["entry_point"]))  # the parent sends a program with its entry point
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


def _batch(fn: Any, nonce: int, batch: list[Any], max_out: int, send: Callable[[str], None], pv: ModuleType) -> None:
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
