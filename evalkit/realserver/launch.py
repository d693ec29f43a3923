"""Starting a `llama-server` on 127.0.0.1 with a free port, waiting for health, and stopping it by process group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.addresses import free_port


@dataclass(frozen=True)
class ServerOptions:
    """The llama-server flags a test varies; the rest are fixed for a 2-core CPU box."""

    parallel: int = 1  # -np: slots; with an explicit -np each slot gets ctx / parallel
    ctx: int = 8192  # -c: total KV cache, split over the slots
    batch: int | None = None  # -b (server default 2048); 512 lets a long prefill yield to other slots
    ubatch: int | None = None  # -ub (server default 512)
    # -t and -tb. One: ggml's threads meet at a spinning barrier per graph node, and on a busy 2-core machine two of
    # them collapsed to 0.33 tok/s (a token every 3 s: each barrier waits out a descheduled partner); one thread
    # decoded 64 tokens in 5.1 s under the same load (3.3 s idle, against 1.8 s with two).
    threads: int = 1
    alias: str | None = None  # the id /v1/models lists (default: the model file's stem)
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    def args(self) -> list[str]:
        """The flags, as llama-server takes them."""
        out = ["-np", str(self.parallel), "-c", str(self.ctx), "-t", str(self.threads), "-tb", str(self.threads)]
        if self.batch is not None:
            out += ["-b", str(self.batch)]
        if self.ubatch is not None:
            out += ["-ub", str(self.ubatch)]
        return out + list(self.extra_args)

    def label(self) -> str:
        """A short name for logs and run names, e.g. `np2-b512`."""
        text = f"np{self.parallel}"
        if self.batch is not None:
            text += f"-b{self.batch}"
        return text


class ServerProcess:
    """What every real server started here shares: its process (a group of its own), port and log, stopped as a
    group. The launched servers (`LlamaServer`, `VllmServer`) are dataclasses holding these fields."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def root_url(self) -> str:
        """`http://127.0.0.1:PORT` (the server's own endpoints: /health, /metrics, /tokenize ...)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL."""
        return f"{self.root_url}/v1"

    @property
    def pid(self) -> int:
        """The server's process id (also its process-group id)."""
        return self.process.pid

    def log_text(self) -> str:
        """Everything the server has written to its log so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after `timeout_s`; returns the exit code."""
        if self.process.poll() is None:
            signal_group(self.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                signal_group(self.pid, signal.SIGKILL)
                self.process.wait(timeout=timeout_s)
        return self.process.returncode

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class LlamaServer(ServerProcess):
    """One running llama-server process (the leader of its own process group)."""

    process: subprocess.Popen[bytes]
    port: int
    options: ServerOptions
    model_id: str
    log_path: Path
    command: list[str]
    startup_s: float = 0.0

    def __enter__(self) -> LlamaServer:
        return self


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send `sig` to the process group `pid` leads (gone already: nothing to do)."""
    try:
        os.killpg(pid, sig)  # the server was started in its own session, so its pgid is its pid
    except ProcessLookupError:
        pass


def _healthy(root_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{root_url}/health", timeout=2) as r:
            status: int = r.status
            return status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False  # 503 while loading the model, refused before it listens


def start_llama_server(
    binary: Path,
    model: Path,
    options: ServerOptions = ServerOptions(),
    log_dir: Path | None = None,
    startup_timeout_s: float = 120.0,
) -> LlamaServer:
    """Start llama-server on 127.0.0.1 and return once `/health` answers 200; raise with the log's tail otherwise."""
    log_dir = Path(log_dir or Path.cwd())
    log_dir.mkdir(parents=True, exist_ok=True)
    alias = options.alias or model.stem
    last_error = ""
    for _attempt in range(3):  # a free port can be taken between our probe and the server's bind
        port = free_port()
        log_path = log_dir / f"llama-server-{options.label()}-{port}.log"
        cmd = [
            str(binary),
            "-m",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--alias",
            alias,
            "--metrics",
            "--no-webui",
            *options.args(),
        ]
        start = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        server = LlamaServer(proc, port, options, alias, log_path, cmd)
        while time.monotonic() - start < startup_timeout_s:
            if proc.poll() is not None:
                break
            if _healthy(server.root_url):
                server.startup_s = time.monotonic() - start
                return server
            time.sleep(0.1)
        code = server.stop()
        tail = "\n".join(server.log_text().splitlines()[-15:])
        last_error = f"llama-server (exit {code}) did not become healthy within {startup_timeout_s:g} s:\n{tail}"
        if "bind" not in tail.lower():
            break
    raise RuntimeError(last_error)
