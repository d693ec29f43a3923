"""llama-cpp-python's OpenAI server, provisioned like llama-server: built once from the PyPI source package with the
same no-AMX flags (less the ISA extensions this CPU lacks), cached by version + flags hash, run from a virtual
environment of its own.

`<cache>/llama-cpp-python/<version>-<flags hash>/` holds the wheel, `build.log` and `venv/` (the wheel with its
`[server]` extra: FastAPI, uvicorn, starlette-context ...), so its dependencies never touch evalkit's environment.
`$EVALKIT_LLAMA_CPP_PYTHON` (a Python that can `import llama_cpp.server`) points the tests at one of your own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalkit.addresses import free_port
from evalkit.realserver.cpu_isa import runnable_flags
from evalkit.realserver.provisioning import BUILD_FLAGS, BUILD_JOBS, build_key, cache_root, locked, reuse_or_build

VERSION = "0.3.36"


def build_flags(have: set[str] | None = None) -> tuple[str, ...]:
    """BUILD_FLAGS without the ISA extensions this CPU lacks (AMX stays off either way)."""
    return runnable_flags(BUILD_FLAGS, have)


@dataclass(frozen=True)
class PythonServer:
    """The interpreter of the environment llama-cpp-python's server is installed in."""

    python: Path


def build_dir(root: Path | None = None) -> Path:
    """Where the wheel and the venv for the current version and flags live."""
    return (root or cache_root()) / "llama-cpp-python" / build_key(VERSION, build_flags())


def cached_wheel(directory: Path) -> Path | None:
    """The cached llama_cpp_python wheel in `directory`, if there is one."""
    wheels = sorted(directory.glob(f"llama_cpp_python-{VERSION}-*.whl"))
    return wheels[-1] if wheels else None


def build_wheel(directory: Path, say: Callable[[str], None] = print) -> Path:
    """Compile llama-cpp-python (it vendors llama.cpp) into a wheel in `directory`; log in `build.log`."""
    log_path = directory / "build.log"
    flags = build_flags()
    env = {**os.environ, "CMAKE_ARGS": " ".join(flags), "CMAKE_BUILD_PARALLEL_LEVEL": str(BUILD_JOBS)}
    say(f"building llama-cpp-python {VERSION} from source with {' '.join(flags)}; log: {log_path}")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=directory) as tmp, open(log_path, "w") as log:
        # --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS and could hand back a -march=native (SIGILL) build.
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-cache-dir",
            "--no-deps",
            f"llama-cpp-python=={VERSION}",
            "-w",
            tmp,
        ]
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        built = cached_wheel(Path(tmp))
        if rc != 0 or built is None:
            raise RuntimeError(f"building llama-cpp-python failed (exit {rc}); see {log_path}")
        final = directory / built.name
        os.replace(built, final)
    say(f"built {final.name} in {time.monotonic() - start:.0f} s")
    return final


def venv_python(directory: Path) -> Path:
    """The server venv's interpreter."""
    return directory / "venv" / "bin" / "python"


def _importable(python: Path) -> bool:
    return (
        python.exists()
        and subprocess.run([str(python), "-c", "import llama_cpp.server.app"], capture_output=True).returncode == 0
    )


def provision(
    root: Path | None = None, seed_wheel: Path | None = None, say: Callable[[str], None] = print
) -> PythonServer:
    """Reuse or build the wheel, and install it with its `[server]` extra into the cached venv (once)."""
    directory = build_dir(root)
    with locked(directory):
        wheel = reuse_or_build(directory, cached_wheel, build_wheel, seed_wheel, say)
        python = venv_python(directory)
        if not _importable(python):
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(directory / "venv")], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", f"{wheel}[server]"], check=True)
            say(f"installed {wheel.name}[server] into {directory / 'venv'}")
        else:
            say(f"llama-cpp-python already installed in {directory / 'venv'}")
    return PythonServer(python)


def locate(root: Path | None = None, env: dict[str, str] | None = None) -> PythonServer | str:
    """The provisioned server's interpreter without building anything, or a one-line reason why there is none."""
    env = dict(os.environ) if env is None else env
    python = (
        Path(env["EVALKIT_LLAMA_CPP_PYTHON"])
        if env.get("EVALKIT_LLAMA_CPP_PYTHON")
        else venv_python(build_dir(root or cache_root(env)))
    )
    if not _importable(python):
        return (
            f"llama-cpp-python {VERSION} is not provisioned at {python} "
            "(run: python -m evalkit.realserver provision-llama-cpp-python)"
        )
    return PythonServer(python)


@dataclass
class RunningServer:
    """One running `python -m llama_cpp.server` (leader of its own process group)."""

    process: subprocess.Popen[bytes]
    port: int
    model_id: str
    log_path: Path
    startup_s: float = 0.0

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def log_text(self) -> str:
        """What the server has written so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM the group, SIGKILL after `timeout_s`."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=timeout_s)
        return self.process.returncode


def _up(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as r:
            status: int = r.status
            return status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def start(
    server: PythonServer, model: Path, n_ctx: int = 8192, log_dir: Path | None = None, startup_timeout_s: float = 120.0
) -> RunningServer:
    """Start the server on 127.0.0.1 and return once `/v1/models` answers; raise with the log's tail otherwise."""
    log_dir = Path(log_dir or Path.cwd())
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = log_dir / f"llama-cpp-python-{port}.log"
    cmd = [
        str(server.python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--model_alias",
        model.stem,
        # One thread, as the llama-server tests (evalkit/realserver/launch.py): two spinning ggml threads collapse on
        # a busy 2-core machine; one prefills about half as fast on an idle one.
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
    ]
    begin = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    running = RunningServer(proc, port, model.stem, log_path)
    while time.monotonic() - begin < startup_timeout_s and proc.poll() is None:
        if _up(running.base_url):
            running.startup_s = time.monotonic() - begin
            return running
        time.sleep(0.2)
    code = running.stop()
    tail = "\n".join(running.log_text().splitlines()[-15:])
    raise RuntimeError(f"llama-cpp-python server (exit {code}) did not come up within {startup_timeout_s:g} s:\n{tail}")
