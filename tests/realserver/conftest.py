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

from evalkit.realserver import vllm_cpu
from evalkit.realserver.launch import LlamaServer, ServerOptions, start_llama_server
from evalkit.realserver.provisioning import Provisioned, locate
from evalkit.realserver.vllm_launch import VllmOptions, VllmServer, start_vllm

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


class _OneAtATime:
    """The session's running servers of every kind: starting one stops the others (2 cores; vLLM's RSS ~3.7 GiB)."""

    def __init__(self) -> None:
        self.running: dict[object, LlamaServer | VllmServer] = {}

    def get(self, key: object) -> Any:
        server = self.running.get(key)
        return server if server is not None and server.process.poll() is None else None

    def start(self, key: object, launch: Callable[[], LlamaServer | VllmServer]) -> Any:
        self.stop_all()
        self.running[key] = launch()
        return self.running[key]

    def stop_all(self) -> None:
        for server in self.running.values():
            server.stop()
        self.running.clear()


@pytest.fixture(scope="session")
def one_server_at_a_time() -> Iterator[_OneAtATime]:
    """The session's servers, stopped at its end."""
    servers = _OneAtATime()
    yield servers
    servers.stop_all()


@pytest.fixture(scope="session")
def server_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the servers' logs go (printed when a test fails)."""
    return tmp_path_factory.mktemp("llama-server-logs")


@pytest.fixture(scope="session")
def llama_server(
    provisioned: Provisioned, server_logs: Path, one_server_at_a_time: _OneAtATime
) -> Callable[..., LlamaServer]:
    """`llama_server(parallel=2, ctx=..., batch=512, ubatch=512)`: a running server for those options.

    One server per distinct option set, reused across tests and stopped at the end of the session; only one
    server of any kind runs at a time, since two on 2 cores would slow each other's measurements.
    """

    def get(**kw: Any) -> LlamaServer:
        options = ServerOptions(**kw)
        server = one_server_at_a_time.get(options)
        if server is not None:
            return server
        server = one_server_at_a_time.start(
            options, lambda: start_llama_server(provisioned.binary, provisioned.model, options, log_dir=server_logs)
        )
        print(
            f"\n[realserver] llama-server {' '.join(options.args())} pid {server.pid} up in "
            f"{server.startup_s:.1f} s at {server.base_url} (log {server.log_path})"
        )
        return server

    return get


@pytest.fixture(scope="session")
def vllm_provisioned() -> vllm_cpu.VllmProvisioned:
    """The provisioned vLLM venv and converted model, or a skip (a failure in CI) saying why not."""
    if os.environ.get("EVALKIT_SKIP_REAL") == "1":
        _NOT_RUN.append("EVALKIT_SKIP_REAL=1 is set")
        pytest.skip("EVALKIT_SKIP_REAL=1: real vLLM tests skipped")
    found = vllm_cpu.locate()
    if isinstance(found, str):
        if os.environ.get("CI"):
            pytest.fail(f"{found} -- CI must run .ci/provision_llama_server.sh first", pytrace=False)
        _NOT_RUN.append(f"vLLM not provisioned: {found}")
        pytest.skip(found)
    return found


@pytest.fixture(scope="session")
def vllm_server(
    vllm_provisioned: vllm_cpu.VllmProvisioned, server_logs: Path, one_server_at_a_time: _OneAtATime
) -> Callable[..., VllmServer]:
    """`vllm_server()` or `vllm_server(max_num_batched_tokens=512, long_prefill_token_threshold=256)`: a running
    vLLM for those options, shared by every test that asks for the same ones (its log is `server.log_path`)."""

    def get(**kw: Any) -> VllmServer:
        options = VllmOptions(**kw)
        server = one_server_at_a_time.get(options)
        if server is not None:
            return server
        server = one_server_at_a_time.start(options, lambda: start_vllm(vllm_provisioned, options, log_dir=server_logs))
        print(
            f"\n[realserver] vLLM {' '.join(options.args())} pid {server.pid} up in {server.startup_s:.1f} s "
            f"at {server.base_url} (log {server.log_path})"
        )
        return server

    return get
