"""Which of the CPU build's ISA flags this machine can run: a build for an extension the CPU lacks dies with SIGILL.

Seen here: `-DGGML_AVX_VNNI=ON` (the VEX-encoded `vpdpbusd`) on a Xeon that has avx512_vnni but not avx_vnni: the
CPU llama-server crashed with SIGILL on the first quantized matrix product. So the flags are the fixed list less the
extensions /proc/cpuinfo does not name, and the build cache key follows the flags actually used.
"""

from __future__ import annotations

from pathlib import Path

# Each ISA flag of the CPU build and the /proc/cpuinfo flag it needs.
NEEDS = {
    "-DGGML_AVX=ON": "avx",
    "-DGGML_AVX2=ON": "avx2",
    "-DGGML_FMA=ON": "fma",
    "-DGGML_F16C=ON": "f16c",
    "-DGGML_BMI2=ON": "bmi2",
    "-DGGML_AVX_VNNI=ON": "avx_vnni",
    "-DGGML_AVX512=ON": "avx512f",
    "-DGGML_AVX512_VBMI=ON": "avx512_vbmi",
    "-DGGML_AVX512_VNNI=ON": "avx512_vnni",
    "-DGGML_AVX512_BF16=ON": "avx512_bf16",
}


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """The CPU's feature flags, or None when they cannot be read (then every flag is kept)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def runnable_flags(flags: tuple[str, ...], have: set[str] | None = None) -> tuple[str, ...]:
    """`flags` without the ISA extensions this CPU lacks (`have`: its cpuinfo flags; default: read them)."""
    have = cpu_flags() if have is None else have
    if have is None:
        return flags
    return tuple(f for f in flags if NEEDS.get(f) is None or NEEDS[f] in have)
