"""The llama-cpp-python build keeps only the ISA flags the CPU has (a missing one is a SIGILL at the first request)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.realserver.cpu_isa import cpu_flags
from evalkit.realserver.llama_cpp_python import build_dir, build_flags
from evalkit.realserver.provisioning import BUILD_FLAGS

AVX512_ONLY = {"avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512_vnni"}  # this CI Xeon: no avx_vnni/bf16/vbmi


@pytest.mark.parametrize(
    "have,dropped",
    [
        (AVX512_ONLY, {"-DGGML_AVX_VNNI=ON", "-DGGML_AVX512_VBMI=ON", "-DGGML_AVX512_BF16=ON"}),
        (AVX512_ONLY | {"avx_vnni", "avx512_vbmi", "avx512_bf16", "amx_tile"}, set()),
        (
            {"avx", "avx2", "fma", "f16c"},
            {
                "-DGGML_BMI2=ON",
                "-DGGML_AVX_VNNI=ON",
                "-DGGML_AVX512=ON",
                "-DGGML_AVX512_VBMI=ON",
                "-DGGML_AVX512_VNNI=ON",
                "-DGGML_AVX512_BF16=ON",
            },
        ),
    ],
)
def test_build_flags(have: set[str], dropped: set[str]) -> None:
    flags = build_flags(have)
    assert set(BUILD_FLAGS) - set(flags) == dropped
    assert "-DGGML_NATIVE=OFF" in flags and "-DLLAMA_BUILD_TESTS=OFF" in flags  # never -march=native (AMX)


def test_cpu_flags_read(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx avx2 avx512f\n")
    assert cpu_flags(info) == {"fpu", "avx", "avx2", "avx512f"}
    assert cpu_flags(tmp_path / "missing") is None


def test_cache_key_follows_flags(tmp_path: Path) -> None:
    assert build_dir(tmp_path).parent == tmp_path / "llama-cpp-python"
    assert build_dir(tmp_path).name.startswith("0.3.36-")


def test_llama_server_build_uses_the_same_runnable_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.realserver import provisioning

    monkeypatch.setattr("evalkit.realserver.cpu_isa.cpu_flags", lambda: AVX512_ONLY)
    assert "-DGGML_AVX_VNNI=ON" not in provisioning.build_flags()
    assert provisioning.build_dir().name == provisioning.build_key(flags=provisioning.build_flags())
