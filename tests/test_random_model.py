"""random-model: shapes, parameter counts, and a tiny GGUF that carries the source's tokenizer and says it is random."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

from evalkit.realserver.random_model import MARKER_KEY, SHAPES, tensor_plan, write_random_model

TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["ab"]


def _tokenizer_gguf(path: Path) -> Path:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(TOKENS)
    w.add_token_types([3, 3, 3] + [1] * (len(TOKENS) - 3))
    w.add_token_merges(["a b"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}")
    w.add_tensor("token_embd.weight", np.zeros((len(TOKENS), 8), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _string(reader: gguf.GGUFReader, key: str) -> str:
    f = reader.fields[key]
    return bytes(f.parts[f.data[0]]).decode()


def test_llama3_8b_shape_has_the_sizes_of_the_gpu_notes() -> None:
    # With SmolLM2's 49,152-token vocabulary: 7.4 B parameters, 13.75 GiB of F16 (gpu-device-notes.md).
    params = SHAPES["llama3-8b"].parameters(49152)
    assert 7.35e9 < params < 7.42e9
    assert abs(params * 2 / 2**30 - 13.75) < 0.05
    names = [n for n, _, _ in tensor_plan(SHAPES["llama3-8b"], 49152)]
    assert len(names) == 32 * 9 + 3 and names[0] == "token_embd.weight" and names[-1] == "output.weight"


def test_tiny_model_carries_the_tokenizer_and_its_marker(tmp_path: Path) -> None:
    src = _tokenizer_gguf(tmp_path / "tok.gguf")
    out = tmp_path / "tiny.gguf"
    params = write_random_model(SHAPES["tiny"], src, out, seed=3, say=lambda m: None)
    r = gguf.GGUFReader(str(out))
    assert bool(r.fields[MARKER_KEY].parts[r.fields[MARKER_KEY].data[0]][0]) is True
    assert "RANDOM WEIGHTS" in _string(r, "general.name")
    assert _string(r, "tokenizer.chat_template").startswith("{% for m in messages %}")
    tokens = r.fields["tokenizer.ggml.tokens"]
    assert [bytes(tokens.parts[i]).decode() for i in tokens.data] == TOKENS
    assert r.fields["tokenizer.ggml.token_type"].types[1] == gguf.GGUFValueType.INT32
    got = {t.name: t for t in r.tensors}
    assert sum(int(np.prod(t.shape)) for t in r.tensors) == params
    q = got["blk.0.attn_q.weight"]
    assert q.tensor_type == gguf.GGMLQuantizationType.F16 and list(q.shape) == [64, 64]
    values = np.asarray(got["blk.1.ffn_down.weight"].data, dtype=np.float32)
    assert np.isfinite(values).all() and 0.005 < values.std() < 0.05  # random, small: activations stay finite
    assert np.all(np.asarray(got["output_norm.weight"].data) == 1.0)


def test_cli_rejects_a_missing_tokenizer_source(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalkit.realserver",
            "random-model",
            "--shape",
            "tiny",
            "--tokenizer-from",
            str(tmp_path / "nope.gguf"),
            "--out",
            str(tmp_path / "x.gguf"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "no such file" in done.stderr


def test_a_source_without_tokenizer_is_refused(tmp_path: Path) -> None:
    w = gguf.GGUFWriter(str(tmp_path / "bare.gguf"), "llama")
    w.add_tensor("x", np.zeros(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ValueError, match="tokenizer"):
        write_random_model(SHAPES["tiny"], tmp_path / "bare.gguf", tmp_path / "o.gguf", say=lambda m: None)
