"""The CUDA llama-server build's command line, cache key and toolchain check (no GPU or nvcc needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.realserver.cuda_build import (
    CUDA_FLAGS,
    CudaBuild,
    MissingToolchain,
    check_toolchain,
    cuda_dir,
    find_nvcc,
    provision_cuda,
)


@pytest.mark.parametrize("arch", ["90", "86", "89", "75"])
def test_configure_line_names_the_arch_and_builds_offline(arch: str) -> None:
    cmd = CudaBuild(arch=arch).configure_command(Path("src"), Path("out"))
    assert cmd[:5] == ["cmake", "-S", "src", "-B", "out"]
    assert f"-DCMAKE_CUDA_ARCHITECTURES={arch}" in cmd
    for flag in ("-DGGML_CUDA=ON", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", "-DBUILD_SHARED_LIBS=OFF"):
        assert flag in cmd  # the UI flags keep the build from downloading the web UI
    assert CudaBuild().build_command(Path("out"), 16) == [
        "cmake",
        "--build",
        "out",
        "--target",
        "llama-server",
        "-j",
        "16",
    ]


def test_cache_key_follows_version_arch_and_flags(tmp_path: Path) -> None:
    base = CudaBuild()
    assert base.key() == CudaBuild().key()
    assert base.key().startswith(f"{base.version}-cuda90-")
    others = {
        CudaBuild(arch="75").key(),
        CudaBuild(extra_flags=("-DGGML_CUDA_F16=ON",)).key(),
        CudaBuild(version="1.0.0").key(),
    }
    assert base.key() not in others and len(others) == 3
    assert cuda_dir(base, tmp_path) == tmp_path / "llama-server-cuda" / base.key()
    # The CPU build's cache is elsewhere: a CUDA binary is never mistaken for the CPU wheel.
    assert "llama-server-cuda" in str(cuda_dir(base, tmp_path)) and set(CUDA_FLAGS) <= set(base.cmake_flags())


def test_nvcc_is_found_from_cudacxx_path_or_cuda_home(tmp_path: Path) -> None:
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert find_nvcc({"PATH": str(empty), "CUDA_HOME": str(tmp_path / "cuda")}) == nvcc
    assert find_nvcc({"PATH": str(empty), "CUDACXX": str(nvcc), "CUDA_HOME": str(empty)}) == nvcc
    assert find_nvcc({"PATH": str(nvcc.parent), "CUDA_HOME": str(empty)}) == nvcc
    assert find_nvcc({"PATH": str(empty), "CUDA_HOME": str(empty)}) is None
    with pytest.raises(MissingToolchain, match="nvcc"):
        check_toolchain({"PATH": str(empty), "CUDA_HOME": str(empty)})


def test_a_cached_binary_is_reused_without_a_toolchain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build = CudaBuild(arch="75")
    binary = cuda_dir(build, tmp_path) / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "none"))
    said: list[str] = []
    assert provision_cuda(build, tmp_path, say=said.append) == binary
    assert said == [f"reusing cached CUDA build {binary}"]


def test_cuda_without_nvcc_exits_2_with_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CUDACXX"}
    env.update(PATH=str(empty), CUDA_HOME=str(tmp_path / "no-cuda"))
    done = subprocess.run(
        [sys.executable, "-m", "evalkit.realserver", "provision", "--cuda", "--cache", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "nvcc" in lines[0] and "Traceback" not in done.stderr
