"""The command line as a user meets it: help, one-line errors, exit codes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evalkit.cli import COMMANDS


def run_cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_help_lists_every_command():
    out = run_cli("--help")
    assert out.returncode == 0
    for name in COMMANDS:
        assert name in out.stdout


@pytest.mark.parametrize(
    "args", [["bench", "--no-such-flag"], ["nosuchcommand"], ["capability", "--thinking", "maybe"]]
)
def test_bad_flags_give_one_line_and_exit_2(args):
    out = run_cli(*args)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("command", ["bench", "capability", "stress"])
def test_unreachable_server_is_exit_2_with_reason(command, tmp_path):
    extra = ["--thinking", "off"] if command == "capability" else []
    out = run_cli(command, *extra, "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "cannot reach server" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_malformed_config_is_exit_2(tmp_path):
    cfg = tmp_path / "evalkit.toml"
    cfg.write_text("[servers.x\n")
    out = run_cli("bench", "--config", str(cfg), "--server", "x", "--out", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2
    assert "malformed TOML" in out.stderr and len(out.stderr.strip().splitlines()) == 1
