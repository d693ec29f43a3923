"""Model-written code under bubblewrap: a table of hostile answers, each of which would pass (or harm the host) if
its trick worked; each is graded a failure, changes no file outside its sandbox, leaves no process behind, and the
next program still runs. Plus the plain-value wall (lying objects never cross it), the replay run going on past
hostile answers, and the refusal without bubblewrap (exit 2, one line) that `--unsafe-exec` lifts."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit_evals import plain_values
from evalkit_evals.differential import check_program, reference_outputs, reference_worker
from evalkit_evals.isolation import Isolation, find_bubblewrap
from evalkit_evals.sandbox import SandboxLimits

REPO = Path(__file__).resolve().parent.parent
EVALKIT = [sys.executable, "-m", "evalkit"]
BWRAP = find_bubblewrap()
if not isinstance(BWRAP, Isolation) and os.environ.get("CI"):
    raise RuntimeError(f"CI must grade isolated: {BWRAP}")  # .ci/run installs bubblewrap
needs_bwrap = pytest.mark.skipif(not isinstance(BWRAP, Isolation), reason=f"{BWRAP}")

PROBLEM: dict[str, Any] = {
    "task_id": "Toy/0",
    "prompt": "def add(a, b):\n",
    "canonical_solution": "    return a + b  # REFERENCE-MARK\n",
    "entry_point": "add",
    "base_input": [[1, 2], [3, 4]],
    "plus_input": [[5, 6], [10**30, 7], [-1, 1]],
    "atol": 0,
}
REF = PROBLEM["prompt"] + PROBLEM["canonical_solution"]
LIMITS = SandboxLimits(cpu_s=10, wall_s=20, output_bytes=1 << 20, load_s=5)


@pytest.fixture(scope="module")
def host() -> Iterator[dict[str, Path]]:
    """World-writable canaries where a program would reach: a run directory beside others, a dataset file, the
    host's /tmp and /dev/shm; only the sandbox's walls keep a program (even with another uid) out of them."""
    root = Path(tempfile.mkdtemp(prefix="sandbox-canary-", dir=REPO / "results"))
    paths = {
        "root": root,
        "run": root / "results" / "run-a",
        "other_run": root / "results" / "run-b",
        "data": root / "datasets",
        "tmp": Path(tempfile.mkdtemp(prefix="evalkit-canary-", dir="/tmp")),
        "shm": Path(tempfile.mkdtemp(prefix="evalkit-canary-", dir="/dev/shm")),
    }
    for key in ("run", "other_run", "data"):
        paths[key].mkdir(parents=True)
    (paths["other_run"] / "graded.jsonl").write_text(json.dumps({"content": REF}) + "\n")
    (paths["data"] / "problems.jsonl").write_text(json.dumps(PROBLEM) + "\n")
    for p in [root, *root.rglob("*"), paths["tmp"], paths["shm"]]:
        os.chmod(p, 0o777)
    yield paths
    for key in ("root", "tmp", "shm"):
        shutil.rmtree(paths[key], ignore_errors=True)


def _snapshot(paths: dict[str, Path]) -> dict[str, str]:
    out = {}
    for key in ("root", "tmp", "shm"):
        for p in sorted([paths[key], *paths[key].rglob("*")]):
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    for p in (REPO / "evals").glob("*.py"):
        out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _children(pid: int) -> list[int]:
    try:
        return [
            int(c) for t in os.listdir(f"/proc/{pid}/task") for c in _read(f"/proc/{pid}/task/{t}/children").split()
        ]
    except OSError:
        return []


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _parents() -> dict[int, list[int]]:
    # Kernels without CONFIG_PROC_CHILDREN: each process's parent, from its stat line (the field after the name).
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        stat = _read(f"/proc/{entry}/stat") if entry.isdigit() else ""
        if stat:
            kids.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    return kids


def _own_tree(root: int) -> list[int]:
    """`root` and every process below it: only this test's own process tree, never the machine's (another
    evalkit's sandboxes on a busy CI box are none of this test's business)."""
    has_children_file = os.path.exists(f"/proc/{root}/task/{root}/children")
    kids = None if has_children_file else _parents()
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo += _children(pid) if kids is None else kids.get(pid, [])
    return seen


def _sandbox_processes() -> list[int]:
    """This test's sandbox children still alive (bubblewrap's PID namespace keeps them all inside its tree)."""
    return [p for p in _own_tree(os.getpid()) if b"/sandbox/sandbox_child.py" in _read(f"/proc/{p}/cmdline").encode()]


def test_the_process_check_sees_only_its_own_tree() -> None:
    # A look-alike outside this test's tree (started in the background by a shell that exits, so reparented
    # away): another evalkit's sandbox on the same machine.
    script = "import time; time.sleep(30)"
    out = subprocess.run(
        ["sh", "-c", f"{sys.executable} -c '{script}' /sandbox/sandbox_child.py >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    stranger = int(out.stdout.split()[0])
    try:
        assert "/sandbox/sandbox_child.py" in _read(f"/proc/{stranger}/cmdline")
        assert stranger not in _own_tree(os.getpid()) and stranger not in _sandbox_processes()
        mine = subprocess.Popen([sys.executable, "-c", script, "/sandbox/sandbox_child.py"])
        try:
            deadline = time.monotonic() + 10
            while "/sandbox/" not in _read(f"/proc/{mine.pid}/cmdline") and time.monotonic() < deadline:
                time.sleep(0.01)  # until it has exec'd
            assert _sandbox_processes() == [mine.pid]
        finally:
            mine.kill()
            mine.wait()
    finally:
        os.kill(stranger, 9)


def _fn(body: str, head: str = "") -> str:
    return f"{head}\ndef add(a, b):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())


# name -> the program. Each one passes (or leaves a mark on the host) if its trick works.
HOSTILE: dict[str, str] = {
    # forged results and the channel
    "fake_result_line_and_exit": _fn(
        "return 0",
        'import os\nos.write(1, b\'{"base": {"status": "pass", \''
        'b\'"passed": 2, "total": 2}, "plus": {"status": "pass"}\\n\')\n'
        "print('{\"ready\": true}')\nos._exit(0)",
    ),
    "forged_replies_on_every_fd": _fn(
        "import os\nfor fd in range(3, 64):\n"
        '    try: os.write(fd, b\'{"n":1,"ok":true,"s":0.0,"out":3}\\n\')\n'
        "    except OSError: pass\nreturn None"
    ),
    "garbage_flood_on_channel": _fn(
        "import os\nfor fd in range(3, 64):\n"
        "    try: os.write(fd, b'x' * (4 << 20))\n    except OSError: pass\nreturn 0"
    ),
    "exit_early_at_import": _fn("return a + b", "import sys\nsys.exit(0)"),
    "kill_itself": _fn("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
    "exit_in_call": _fn("import os\nos._exit(0)"),
    # lying objects
    "eq_always_true": _fn(
        "class Yes:\n    def __eq__(self, o): return True\n    __hash__ = object.__hash__\nreturn Yes()"
    ),
    "int_subclass": _fn(
        "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\nreturn I(0)"
    ),
    "str_subclass_in_list": _fn(
        "class S(str):\n    def __eq__(self, o): return True\n    __hash__ = str.__hash__\nreturn [S('x')]"
    ),
    "proxy_raising": _fn("class P:\n    def __getattribute__(self, n): raise RuntimeError('no')\nreturn P()"),
    "generator": _fn("return (x for x in [a + b])"),
    "self_referencing_list": _fn("x = []\nx.append(x)\nreturn x"),
    # reading what it must not see
    "copy_the_reference_from_datasets": _fn(
        "import json\nrow = json.loads(open(@data@ + '/problems.jsonl')"
        ".readline())\ng = {}\nexec(row['prompt'] + row['canonical_solution'], g)"
        "\nreturn g['add'](a, b)"
    ),
    "copy_from_another_run": _fn(
        "import json\ng = {}\n"
        "exec(json.loads(open(@other_run@ + '/graded.jsonl').readline())['content'], g)\n"
        "return g['add'](a, b)"
    ),
    "search_memory_for_expected": _fn(
        "import gc\nfor o in gc.get_objects():\n"
        "    if isinstance(o, dict) and 'canonical_solution' in o:\n"
        "        g = {}\n        exec(o['prompt'] + o['canonical_solution'], g)\n"
        "        return g['add'](a, b)\nreturn None"
    ),
    "read_host_processes": _fn(
        "import os\nfor p in os.listdir('/proc'):\n"
        "    if p.isdigit():\n        try:\n"
        "            if b'REFERENCE-MARK' in open(f'/proc/{p}/cmdline', 'rb').read() + "
        "open(f'/proc/{p}/environ', 'rb').read(): return a + b\n"
        "        except OSError: pass\nreturn None"
    ),
    "read_api_key": _fn("import os\nreturn a + b if os.environ.get('OPENAI_API_KEY') else None"),
    "read_home": _fn(
        "import os\nreturn a + b if os.path.exists('/root/.bashrc') or "
        "os.path.exists(os.path.expanduser('~/.cache')) else None"
    ),
    # writing where it must not
    "write_run_dir": _fn("return None", "open(@run@ + '/graded.jsonl', 'w').write('{\"correct\": true}')"),
    "write_host_tmp": _fn("return None", "open(@tmp@ + '/pwned', 'w').write('x')\nopen('/tmp/evalkit-pwned', 'w')"),
    "write_host_shm": _fn("return None", "open(@shm@ + '/pwned', 'w').write('x')"),
    "write_var_tmp_and_evals": _fn(
        "return None",
        "open('/var/tmp/evalkit-pwned', 'w').write('x')\n"
        f"open({str(REPO / 'evals' / 'differential.py')!r}, 'a').write('#')",
    ),
    "fill_private_tmp": _fn("return None", "f = open('/tmp/big', 'wb')\nwhile True: f.write(b'x' * (1 << 20))"),
    # resources
    "fork_bomb": _fn("import os\nwhile True:\n    try: os.fork()\n    except OSError: pass"),
    "daemon_survives": _fn(
        "return None",
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n"
        "    time.sleep(3)\n    open(@tmp@ + '/late', 'w')\n    os._exit(0)",
    ),
    "alloc_50gb": _fn("x = bytearray(50 * 1024**3)\nreturn a + b"),
    "huge_output": _fn("return 'x' * (64 << 20)"),
    "sleep_forever": _fn("import time\ntime.sleep(10**6)"),
    "loop_ignoring_signals": _fn(
        "import signal\nfor s in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True: pass"
    ),
    "network": _fn("import socket\nsocket.create_connection(('127.0.0.1', @port@), timeout=2).close()\nreturn a + b"),
}


@pytest.fixture(scope="module")
def listener() -> Iterator[tuple[int, list[int]]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    hits: list[int] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                server.accept()[0].close()
                hits.append(1)
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield server.getsockname()[1], hits
    stop.set()
    t.join()
    server.close()


@pytest.fixture(scope="module")
def expected() -> Any:
    assert isinstance(BWRAP, Isolation)
    with reference_worker(BWRAP) as worker:
        return reference_outputs(PROBLEM, worker)


@needs_bwrap
def test_table_is_big_enough() -> None:
    assert len(HOSTILE) >= 20


@needs_bwrap
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_answer_fails_alone(
    name: str, host: dict[str, Path], listener: tuple[int, list[int]], expected: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    port, hits = listener
    code = HOSTILE[name].replace("@port@", str(port))
    for key, path in host.items():
        code = code.replace(f"@{key}@", repr(str(path)))
    before = _snapshot(host)
    t0 = time.monotonic()
    res = check_program(code, PROBLEM, expected, BWRAP, LIMITS)
    assert time.monotonic() - t0 < 40
    assert res["base"]["status"] != "pass" or res["plus"]["status"] != "pass", res
    assert not hits, "the program reached the host's network"
    if name == "daemon_survives":
        time.sleep(3.5)  # a survivor would write its file now
    assert _snapshot(host) == before, "a file outside the sandbox changed"
    assert not Path("/tmp/evalkit-pwned").exists() and not Path("/var/tmp/evalkit-pwned").exists()
    deadline = time.monotonic() + 5
    while _sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _sandbox_processes(), "a process of the sandbox survived"


@needs_bwrap
def test_correct_answers_pass(expected: Any) -> None:
    for code in (
        REF,
        _fn("return sum([a, b])"),
        _fn("import numpy\nreturn int(numpy.int64(a) + b) if abs(a) < 2**62 else a + b"),
        _fn("open('/tmp/scratch', 'w').write('x')\nreturn a + b"),
    ):
        res = check_program(code, PROBLEM, expected, BWRAP, LIMITS)
        assert res["base"]["status"] == "pass" and res["plus"]["status"] == "pass", (code, res)


ONE_EACH = {**PROBLEM, "base_input": [[1, 2]], "plus_input": [[3, 4]]}


@needs_bwrap
def test_a_correct_program_on_a_busy_core_passes_and_a_slow_one_times_out() -> None:
    """The per-input limit is CPU time, not wall time: a program that needs 0.8 s of CPU (its limit is 1.5 s) on a
    core shared with three busy loops takes ~3 s of wall time per input and still passes (a loaded machine failed
    correct HumanEval+ answers on the wall clock); one that needs 3 s of CPU times out on the CPU limit, busy core
    or not."""
    assert isinstance(BWRAP, Isolation)
    with reference_worker(BWRAP) as worker:
        expected = reference_outputs(ONE_EACH, worker)
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < {}: pass\nreturn a + b"
    cpu = min(os.sched_getaffinity(0))
    saved = os.sched_getaffinity(0)
    loops: list[subprocess.Popen[bytes]] = []
    try:
        os.sched_setaffinity(0, {cpu})  # the sandbox and the busy loops inherit it: one core, four takers
        # Each in a session of its own, as the sandbox is: the kernel's autogroups then share the core four ways.
        loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(3)]
        t0 = time.monotonic()
        ok = check_program(_fn(burn.format(0.8)), ONE_EACH, expected, BWRAP, LIMITS)
        took = time.monotonic() - t0
        slow = check_program(_fn(burn.format(3.0)), ONE_EACH, expected, BWRAP, LIMITS)
    finally:
        for lp in loops:
            lp.kill()
            lp.wait()
        os.sched_setaffinity(0, saved)
    print(f"\n[sandbox] 2 x 0.8 s of CPU on a core shared with 3 busy loops: {took:.2f} s wall; {ok}")
    assert ok["base"]["status"] == "pass" and ok["plus"]["status"] == "pass", ok
    assert slow["base"]["status"] == "timeout" and slow["base"]["error"] == "time limit", slow


class _Yes:
    def __eq__(self, other: object) -> bool:
        return True


class _I(int):
    pass


@pytest.mark.parametrize("value", [_Yes(), _I(3), [1, _I(2)], {"a": _Yes()}, (x for x in ()), object()])
def test_only_plain_values_cross(value: Any) -> None:
    with pytest.raises(plain_values.NotPlain):
        plain_values.encode(value, 1 << 20)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        -(2**5000),
        1.5,
        float("inf"),
        "s",
        b"\x00",
        1j,
        [1, "a", None],
        (1, (2,)),
        {1: [2], (3, 4): {"x"}},
        frozenset({1}),
        [[1.0, 2], []],
        {},
    ],
)
def test_plain_values_round_trip(value: Any) -> None:
    back = plain_values.decode(plain_values.encode(value, 1 << 20))
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize("text", ['{"x": 1}', '{"t": 5}', '{"d": [[[1], 2]]}', "[" * 5000 + "]" * 5000, "nope"])
def test_malformed_values_are_refused(text: str) -> None:
    with pytest.raises(plain_values.NotPlain):
        plain_values.decode(text)


def _replay(tmp_path: Path, answers: list[dict], env: dict[str, str], *flags: str) -> subprocess.CompletedProcess:
    src = tmp_path / "answers.jsonl"
    src.write_text("".join(json.dumps(a) + "\n" for a in answers))
    return subprocess.run(
        [*EVALKIT, "capability", "--replay", str(src), "--out", str(tmp_path), "--name", "r", *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


HE23 = "humanevalplus:HumanEval/23"
RIGHT = "```python\ndef strlen(string):\n    return len(string)\n```"


@needs_bwrap
def test_replay_goes_on_past_hostile_answers(tmp_path: Path, data_dir: Path) -> None:
    hostile = [
        "```python\nimport os\ndef strlen(string):\n    os.kill(os.getpid(), 9)\n```",
        "```python\ndef strlen(string):\n    class Y:\n        def __eq__(s, o): return True\n    return Y()\n```",
        "```python\nimport os\ndef strlen(string):\n    while True:\n        try:\n            os.fork()\n"
        "        except OSError:\n            pass\n    return len(string)\n```",
    ]
    answers = [{"id": HE23, "content": c} for c in [RIGHT, *hostile, RIGHT]]
    proc = _replay(tmp_path, answers, {**os.environ, "EVALKIT_DATA_DIR": str(data_dir)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    graded = [json.loads(ln) for ln in (tmp_path / "r" / "graded.jsonl").read_text().splitlines()]
    assert [g["outcome"] for g in graded] == ["correct", "wrong", "wrong", "wrong", "correct"]
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["code_isolation"]["tool"] == "bubblewrap"


def test_without_bubblewrap_exit_2_unless_unsafe_exec(tmp_path: Path, data_dir: Path) -> None:
    env = {**os.environ, "EVALKIT_DATA_DIR": str(data_dir), "EVALKIT_BWRAP": "none"}
    proc = _replay(tmp_path, [{"id": HE23, "content": RIGHT}], env)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--unsafe-exec" in proc.stderr
    assert not (tmp_path / "r").exists()
    proc = _replay(tmp_path, [{"id": HE23, "content": RIGHT}], env, "--unsafe-exec")
    assert proc.returncode == 0, proc.stderr[-2000:]
    graded = json.loads((tmp_path / "r" / "graded.jsonl").read_text().splitlines()[0])
    assert graded["outcome"] == "correct"
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["code_isolation"] == {**manifest["code_isolation"], "tool": "none", "unsafe_exec": True}


def test_no_code_no_sandbox_needed(tmp_path: Path, data_dir: Path) -> None:
    env = {**os.environ, "EVALKIT_DATA_DIR": str(data_dir), "EVALKIT_BWRAP": "none"}
    proc = _replay(tmp_path, [{"id": "gsm8k:0", "content": "#### 18"}], env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["code_isolation"]["tool"] is None


def test_live_run_without_bubblewrap_stops_before_the_server(tmp_path: Path, data_dir: Path) -> None:
    env = {**os.environ, "EVALKIT_DATA_DIR": str(data_dir), "EVALKIT_BWRAP": "none"}
    proc = subprocess.run(
        [
            *EVALKIT,
            "capability",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--thinking",
            "off",
            "--datasets",
            "humanevalplus",
            "--limit",
            "1",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "bubblewrap" in proc.stderr and "--unsafe-exec" in proc.stderr
