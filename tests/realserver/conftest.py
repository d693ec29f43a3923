"""Fixtures for the real-server tests: a provisioned llama-server + SmolLM2, started per configuration.

Skipped only when `EVALKIT_SKIP_REAL=1`, or (outside CI) when nothing is provisioned; in CI (`CI` set) a missing
server is a failure, because `.ci/run` provisions it before the tests run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.realserver.launch import LlamaServer, ServerOptions, start_llama_server
from evalkit.realserver.provisioning import Provisioned, locate

_NOT_RUN: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder carries the `realserver` marker."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.realserver)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the figures the real-server tests measured (even under -q, without -s), or loudly why they did not run."""
    figures = [
        ln
        for key in ("passed", "failed")
        for rep in terminalreporter.stats.get(key, [])
        if rep.when == "call"
        for ln in rep.capstdout.splitlines()
        if ln.startswith("[realserver]")
    ]
    if figures:
        terminalreporter.write_sep("=", "real llama-server figures")
        for line in figures:
            terminalreporter.write_line(line)
    if _NOT_RUN:
        terminalreporter.write_sep("!", "REAL-SERVER TESTS DID NOT RUN", red=True, bold=True)
        terminalreporter.write_line(_NOT_RUN[0])


@pytest.fixture(scope="session")
def provisioned() -> Provisioned:
    """The provisioned llama-server binary and model, or a skip (a failure in CI) saying why not."""
    if os.environ.get("EVALKIT_SKIP_REAL") == "1":
        _NOT_RUN.append("EVALKIT_SKIP_REAL=1 is set")
        pytest.skip("EVALKIT_SKIP_REAL=1: real llama-server tests skipped")
    found = locate()
    if isinstance(found, str):
        reason = f"llama-server not provisioned: {found}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} -- CI must run `python -m evalkit.realserver provision` first", pytrace=False)
        _NOT_RUN.append(reason)
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def server_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the servers' logs go (printed when a test fails)."""
    return tmp_path_factory.mktemp("llama-server-logs")


@pytest.fixture(scope="session")
def llama_server(provisioned: Provisioned, server_logs: Path) -> Iterator[Callable[..., LlamaServer]]:
    """`llama_server(parallel=2, ctx=..., batch=512, ubatch=512)`: a running server for those options.

    One server per distinct option set, reused across tests and stopped at the end of the session; only one
    runs at a time, since two on 2 cores would slow each other's measurements.
    """
    running: dict[ServerOptions, LlamaServer] = {}

    def get(**kw: Any) -> LlamaServer:
        options = ServerOptions(**kw)
        server = running.get(options)
        if server is not None and server.process.poll() is None:
            return server
        for other in running.values():
            other.stop()
        running.clear()
        server = start_llama_server(provisioned.binary, provisioned.model, options, log_dir=server_logs)
        print(
            f"\n[realserver] llama-server {' '.join(options.args())} pid {server.pid} up in "
            f"{server.startup_s:.1f} s at {server.base_url} (log {server.log_path})"
        )
        running[options] = server
        return server

    yield get
    for server in running.values():
        server.stop()
