"""A `tiny` random-weight model written by `random-model` loads in the real llama-server and streams (issue 9).

The same code path writes the 8B-shaped model a GPU run serves; here it has to produce a file llama.cpp accepts,
with SmolLM2's tokenizer and chat template, whose generation runs to its token limit without errors.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from realserver_support import get_json

from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.realserver.launch import ServerOptions, start_llama_server
from evalkit.realserver.random_model import SHAPES, write_random_model

pytestmark = pytest.mark.realserver


async def test_tiny_random_model_serves_a_stream(provisioned, server_logs: Path, tmp_path: Path) -> None:
    model = tmp_path / "random-tiny.gguf"
    write_random_model(SHAPES["tiny"], provisioned.model, model, seed=1, say=lambda m: None)
    options = ServerOptions(parallel=1, ctx=2048, alias="random-tiny")
    with start_llama_server(provisioned.binary, model, options, log_dir=server_logs) as srv:
        question = "Say something."
        async with ChatClient(srv.base_url, srv.model_id) as client:
            rec = await client.chat(
                ChatRequest(
                    [{"role": "user", "content": question}],
                    max_tokens=48,
                    temperature=0.0,
                    extra_body={"ignore_eos": True},
                    request_id="ek-random-tiny-1",
                )
            )
        assert rec.status == "ok", rec.error
        assert rec.completion_tokens == 48 and rec.usage_source == "server"
        assert rec.server_timings and rec.server_timings.get("predicted_n") == 48
        # The chat template and tokenizer came from SmolLM2: the server counts the prompt as SmolLM2 would.
        tokens = get_json(f"{srv.root_url}/tokenize", {"content": question})["tokens"]
        assert rec.prompt_tokens is not None and rec.prompt_tokens > len(tokens)
        props = get_json(f"{srv.root_url}/props")
        assert Path(props["model_path"]).name == model.name
    rate = "-" if rec.decode_tok_s is None else f"{rec.decode_tok_s:.0f}"  # None: every token read in one piece
    print(
        f"[realserver] random tiny model: {rec.completion_tokens} tokens at {rate} tok/s, "
        f"{model.stat().st_size / 2**20:.1f} MiB file"
    )
