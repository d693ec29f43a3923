"""Model-written code in the sandbox: each hostile answer fails only its own question, the host is unharmed,
and the run finishes. The dangerous code runs only inside the sandbox; the test process has a fake HOME."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from evalkit_evals.sandbox import SandboxLimits, run_job, uid_processes

REF = "def add(a, b):\n    return a + b\n"
HOSTILE = {
    "infinite_loop": "def add(a, b):\n    while True:\n        pass\n",
    "fork_bomb": "import os\ndef add(a, b):\n    while True:\n        try:\n            os.fork()\n"
                 "        except OSError:\n            pass\n",
    "alloc_50gb": "def add(a, b):\n    x = bytearray(50 * 1024**3)\n    return a + b\n",
    "read_api_key": "import os\ndef add(a, b):\n    return os.environ['OPENAI_API_KEY']\n",
    "rm_home": "import os\nos.system('rm -rf ~ ' + os.environ.get('CANARY_DIR', ''))\n"
               "def add(a, b):\n    return a + b + 1\n",
}


def _job(code: str) -> dict:
    return {"entry_point": "add", "reference": REF, "code": code, "base": [[1, 2], [3, 4]], "plus": [[5, 6]],
            "atol": 0, "min_time_limit_s": 1.0, "time_limit_factor": 4.0, "load_time_limit_s": 5.0}


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "canary.txt").write_text("still here")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    return home


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_code_fails_only_itself(name: str, fake_home: Path) -> None:
    t0 = time.monotonic()
    res = run_job(_job(HOSTILE[name]), SandboxLimits(cpu_s=10, wall_s=20))
    assert time.monotonic() - t0 < 30
    assert res.result is not None, res.stderr
    assert res.result["base"]["status"] != "pass"
    assert "sk-must-not-leak" not in str(res.result) + res.stderr
    assert (fake_home / "canary.txt").read_text() == "still here"
    uid = res.result["sandbox"]["uid"]
    if os.getuid() == 0:
        assert uid != 0 and not uid_processes(uid)  # nothing of the job survives (fork bomb included)
    # A correct answer right after still passes: the sandbox is reusable and the host is fine.
    ok = run_job(_job(REF))
    assert ok.result["base"]["status"] == "pass" and ok.result["plus"]["status"] == "pass"


def test_no_network(fake_home: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]
    hits: list[int] = []

    def accept() -> None:
        try:
            conn, _ = server.accept()
            hits.append(1)
            conn.close()
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    code = ("import socket\ndef add(a, b):\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n    return a + b\n")
    res = run_job(_job(code), SandboxLimits(cpu_s=10, wall_s=20))
    server.close()
    t.join()
    assert res.result["base"]["status"] == "fail"
    assert not hits


def test_clean_env_and_throwaway_cwd(fake_home: Path) -> None:
    code = ("import os, json\ndef add(a, b):\n"
            "    assert 'OPENAI_API_KEY' not in os.environ and 'PATH' in os.environ\n"
            "    assert os.getcwd() == os.environ['HOME'] and os.getcwd().startswith('/tmp')\n"
            "    open('scratch.txt', 'w').write('x')\n    return a + b\n")
    res = run_job(_job(code))
    assert res.result["base"]["status"] == "pass", res.result
