"""A llama-architecture GGUF of a realistic size with RANDOM weights, for measuring a server without downloading one.

Its text is garbage; its costs are real: prefill and decode do the same arithmetic over the same shapes as the real
model of that size, so a server's speed, memory and scheduling under it are what they would be with real weights.
The tokenizer and chat template are copied from a small real GGUF (`--tokenizer-from`, e.g. SmolLM2-135M-Instruct),
so prompts are counted and templated like that model's. The file says what it is in `general.name`,
`general.description` and `evalkit.random_weights`.

Weights are F16 from one seeded buffer of random values reused across tensors (a fresh draw for 7 B parameters
would take minutes and buy nothing: a server never looks at the values). They are small enough that activations
stay finite, so generation runs instead of failing on NaNs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Written by the generator, checked by nothing: a reader (or `gguf-dump`) can tell the file is not a real model.
MARKER_KEY = "evalkit.random_weights"
_BUFFER_VALUES = 1 << 24  # 32 MiB of F16 values, tiled over every tensor
_SCALE = 0.02


@dataclass(frozen=True)
class Shape:
    """The hyperparameters of a llama-architecture transformer."""

    name: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    context: int
    rope_base: float = 500000.0

    @property
    def head_dim(self) -> int:
        """Dimensions per attention head."""
        return self.n_embd // self.n_head

    def parameters(self, n_vocab: int) -> int:
        """How many weights a model of this shape has with a vocabulary of `n_vocab` tokens."""
        return sum(int(np.prod(shape)) for _, shape, _ in tensor_plan(self, n_vocab))


SHAPES: dict[str, Shape] = {
    # Llama-3-8B's shapes with a 128K context (3.1), so 54K-token prompts fit.
    "llama3-8b": Shape("llama3-8b", n_layer=32, n_embd=4096, n_ff=14336, n_head=32, n_head_kv=8, context=131072),
    "llama3-1b": Shape("llama3-1b", n_layer=16, n_embd=2048, n_ff=8192, n_head=32, n_head_kv=8, context=131072),
    # Small enough for a CPU test: loads in a second, decodes hundreds of tokens a second on two cores.
    "tiny": Shape("tiny", n_layer=2, n_embd=64, n_ff=128, n_head=4, n_head_kv=2, context=8192, rope_base=10000.0),
}


def tensor_plan(shape: Shape, n_vocab: int) -> list[tuple[str, tuple[int, ...], str]]:
    """Every tensor as (GGUF name, numpy shape, dtype): numpy shapes are GGUF's dims reversed (rows first)."""
    kv = shape.n_head_kv * shape.head_dim
    plan: list[tuple[str, tuple[int, ...], str]] = [("token_embd.weight", (n_vocab, shape.n_embd), "f16")]
    for i in range(shape.n_layer):
        b = f"blk.{i}"
        plan += [
            (f"{b}.attn_norm.weight", (shape.n_embd,), "f32"),
            (f"{b}.attn_q.weight", (shape.n_embd, shape.n_embd), "f16"),
            (f"{b}.attn_k.weight", (kv, shape.n_embd), "f16"),
            (f"{b}.attn_v.weight", (kv, shape.n_embd), "f16"),
            (f"{b}.attn_output.weight", (shape.n_embd, shape.n_embd), "f16"),
            (f"{b}.ffn_norm.weight", (shape.n_embd,), "f32"),
            (f"{b}.ffn_gate.weight", (shape.n_ff, shape.n_embd), "f16"),
            (f"{b}.ffn_up.weight", (shape.n_ff, shape.n_embd), "f16"),
            (f"{b}.ffn_down.weight", (shape.n_embd, shape.n_ff), "f16"),
        ]
    plan += [("output_norm.weight", (shape.n_embd,), "f32"), ("output.weight", (n_vocab, shape.n_embd), "f16")]
    return plan


def _tokenizer_fields(source: Path) -> tuple[list[tuple[str, Any, Any]], int]:
    """The `tokenizer.*` key/values of a real GGUF as (key, value, GGUFValueType), and its vocabulary size."""
    import gguf

    reader = gguf.GGUFReader(str(source))
    out: list[tuple[str, Any, Any]] = []
    n_vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                value: Any = [bytes(field.parts[i]).decode("utf-8", errors="surrogateescape") for i in field.data]
            else:
                value = [field.parts[i].tolist()[0] for i in field.data]
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(value)
            out.append((key, value, sub))
        elif vtype == gguf.GGUFValueType.STRING:
            out.append((key, bytes(field.parts[field.data[0]]).decode("utf-8"), vtype))
        else:
            out.append((key, field.parts[field.data[0]].tolist()[0], vtype))
    if not n_vocab:
        raise ValueError(f"{source} has no tokenizer.ggml.tokens: give a GGUF of a real model as --tokenizer-from")
    return out, n_vocab


def _chunks(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, buffer: np.ndarray) -> Iterator[np.ndarray]:
    # Norm weights are ones (a real model's are near 1); matrices tile the random buffer, row block by row block.
    if dtype == "f32":
        yield np.ones(shape, dtype=np.float32)
        return
    total = int(np.prod(shape))
    start = int(rng.integers(0, buffer.size))
    done = 0
    while done < total:
        n = min(total - done, buffer.size - start)
        yield buffer[start : start + n]
        done += n
        start = 0


def write_random_model(
    shape: Shape,
    tokenizer_from: Path,
    out: Path,
    seed: int = 0,
    say: Callable[[str], None] = print,
) -> int:
    """Write the GGUF; returns its parameter count."""
    import gguf

    fields, n_vocab = _tokenizer_fields(tokenizer_from)
    rng = np.random.default_rng(seed)
    buffer = (rng.standard_normal(min(_BUFFER_VALUES, shape.parameters(n_vocab))) * _SCALE).astype(np.float16)
    plan = tensor_plan(shape, n_vocab)
    params = shape.parameters(n_vocab)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(f"random-{shape.name} (RANDOM WEIGHTS: its text is garbage, its costs are real)")
    w.add_description(f"evalkit random-model: {shape.name} shapes, seed {seed}, tokenizer of {tokenizer_from.name}")
    w.add_bool(MARKER_KEY, True)
    w.add_uint32("evalkit.seed", seed)
    w.add_context_length(shape.context)
    w.add_embedding_length(shape.n_embd)
    w.add_block_count(shape.n_layer)
    w.add_feed_forward_length(shape.n_ff)
    w.add_head_count(shape.n_head)
    w.add_head_count_kv(shape.n_head_kv)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_rope_freq_base(shape.rope_base)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    for key, value, vtype in fields:
        if isinstance(value, list):
            w.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=vtype)
        else:
            w.add_key_value(key, value, vtype)
    for name, tshape, dtype in plan:
        np_dtype = np.dtype(np.float16 if dtype == "f16" else np.float32)
        w.add_tensor_info(name, tshape, np_dtype, int(np.prod(tshape)) * np_dtype.itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    # Tensor data goes out piece by piece: the 8B shape is 15 GB and never sits in memory at once.
    assert w.fout is not None  # opened by write_header_to_file
    fout = w.fout[0]
    for _name, tshape, dtype in plan:
        w.write_padding(fout, fout.tell())
        for piece in _chunks(rng, tshape, dtype, buffer):
            piece.tofile(fout)
    w.write_padding(fout, fout.tell())
    w.close()
    say(f"wrote {out} ({params / 1e9:.2f} B parameters, {out.stat().st_size / 2**30:.2f} GiB, random weights)")
    return params
