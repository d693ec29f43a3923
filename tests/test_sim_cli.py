"""`evalkit sim` as a command: the listening line with the real port, clean stop on a signal, one-line errors."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import urllib.request

import pytest

from evalkit.sim.launch import LISTEN_PREFIX


def _evalkit() -> list[str]:
    exe = shutil.which("evalkit")
    return [exe] if exe else [sys.executable, "-m", "evalkit"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_prints_real_port_and_stops_on_signal(sig: int) -> None:
    proc = subprocess.Popen(
        [*_evalkit(), "sim", "--host", "127.0.0.1", "--port", "0", "--time-scale", "10"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith(LISTEN_PREFIX) and line.endswith("/v1")
        base = line[len(LISTEN_PREFIX) :]
        port = int(base.rsplit(":", 1)[1].split("/")[0])
        assert port > 0
        with urllib.request.urlopen(base + "/models", timeout=5) as r:
            assert json.loads(r.read())["data"][0]["id"] == "evalkit-sim"
    finally:
        proc.send_signal(sig)
        assert proc.wait(10) == 0
    assert "Traceback" not in proc.stderr.read()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--accuracy", "1.5"], "argument --accuracy: '1.5' is not a fraction from 0 to 1"),
        (["--time-scale", "0"], "argument --time-scale: '0' is not a number above 0"),
        (["--profile", "nope"], "invalid choice"),
        (["--fail-rate", "0.6", "--stall-rate", "0.6"], "must not exceed 1"),
    ],
)
def test_bad_flags_exit_2_with_one_line(flags: list[str], message: str) -> None:
    out = subprocess.run([*_evalkit(), "sim", "--port", "0", *flags], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_port_in_use_is_a_usage_error(sim) -> None:
    s = sim()
    out = subprocess.run(
        [sys.executable, "-m", "evalkit.sim", "--port", str(s.port)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2 and "cannot listen" in out.stderr
