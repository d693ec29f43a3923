"""How many of the server's tokens one token of the sim's rule is, measured once before a load run.

Prompts are built by the sim's token rule; a real tokenizer cuts the same filler into more or fewer tokens. The
server counts a 1000-token filler prompt (its `/tokenize` or, failing that, a tiny request's reported usage, as
stress does: evalkit/client/tokenize.py) and the ratio scales every prompt length of the run. It is recorded in the
manifest as `token_scale`, so `--dry-run --token-scale F` prints the plan the run sent.
"""

from __future__ import annotations

import random

from evalkit.client import auxiliary
from evalkit.client.chat import ChatClient, ChatRequest, new_request_id
from evalkit.client.prompts import chat_tokens_local
from evalkit.client.tokenize import CounterDescription, messages_for, probe_counter
from evalkit.load.workload import filler_text

SAMPLE_TOKENS = 1000


async def measure_token_scale(client: ChatClient) -> tuple[float, CounterDescription]:
    """(server tokens per sim-rule token, how they were counted); 1.0 when the server cannot count."""

    async def usage_probe(messages: list[dict[str, str]]) -> int | None:
        rec = await client.chat(
            ChatRequest(
                messages=messages,
                max_tokens=1,
                request_id=new_request_id("load-tokens"),
                timeout_s=120.0,
            )
        )
        return rec.prompt_tokens if rec.status == "ok" and rec.usage_source == "server" else None

    sample = messages_for(filler_text(random.Random("load-token-scale"), SAMPLE_TOKENS))
    async with auxiliary.session() as session:
        counter = await probe_counter(session, client.base_url, client.model, usage_probe)
        server = await counter.count(session, sample)
    local = chat_tokens_local(sample)
    return (server / local if server and local else 1.0), counter.describe()
