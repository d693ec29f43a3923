"""`python gguf_to_hf.py GGUF OUT`: convert a llama GGUF into a transformers model directory (bf16 safetensors).

Run by evalkit.realserver.vllm_cpu with the interpreter of vLLM's venv (it has torch, transformers, gguf and
accelerate); evalkit's own environment has no torch, hence the imports inside main().
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    """Convert argv[0] (a .gguf file) into the directory argv[1]; returns the exit code."""
    if len(argv) != 2:
        print("usage: gguf_to_hf.py GGUF OUT", file=sys.stderr)
        return 2
    gguf, out = Path(argv[0]), Path(argv[1])
    torch = importlib.import_module("torch")
    transformers = importlib.import_module("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    # The weights are dequantized on load; without these the saved config would claim a GGUF quantization that
    # vLLM then tries (and fails) to apply to plain safetensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
