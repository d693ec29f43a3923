"""A new server's dialect is one `Dialect` entry (evalkit/evidence/server_dialects.py): registered by one line, the
server is recognised by its /v1/models `owned_by`, gets its own advice, and its /metrics counters give the prefix
cache's hit rate and the draft acceptance, like the built-ins. The built-ins keep their precedence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evalkit.evidence import server_dialects
from evalkit.evidence.prefix_cache_counters import hit_rate
from evalkit.evidence.server_dialects import Dialect, PrefixCacheCounters
from evalkit.evidence.server_kind import advice, kinds, label, server_kind
from evalkit.evidence.spec_decode import from_counters

TOY = Dialect(
    "toyserve",
    "ToyServe",
    owned_by=("toyserve",),
    advice={"metrics": "start toyserve with --stats"},
    prefix_cache=PrefixCacheCounters("toy:cache_hit_tokens_total", "toy:prompt_tokens_total"),
    spec_decode_prefix="toy:spec_decode_",
)


@pytest.fixture
def toy() -> Iterator[Dialect]:
    server_dialects.register(TOY)  # the one registration line
    yield TOY
    server_dialects.unregister(TOY.kind)


def test_a_new_dialect_is_one_entry(toy: Dialect) -> None:
    assert server_kind({"owned_by": ["toyserve"]}) == "toyserve" and label("toyserve") == "ToyServe"
    assert kinds()[-1] == "unknown" and "toyserve" in kinds()
    assert advice("toyserve", "metrics") == "start toyserve with --stats"
    assert advice("toyserve", "tokenize") == advice("unknown", "tokenize")  # no advice of its own: the plain fact
    scrapes = [
        {"ok": True, "series": {"toy:cache_hit_tokens_total": 100.0, "toy:prompt_tokens_total": 400.0}},
        {"ok": True, "series": {"toy:cache_hit_tokens_total": 400.0, "toy:prompt_tokens_total": 1000.0}},
    ]
    assert hit_rate(scrapes) == {
        "source": "toy:cache_hit_tokens_total / toy:prompt_tokens_total",
        "cached_tokens": 300,
        "prompt_tokens": 600,
        "hit_rate": 0.5,
    }
    spec = from_counters(
        {"toy:spec_decode_num_drafts_total": 10.0, "toy:spec_decode_num_draft_tokens_total": 30.0}
        | {"toy:spec_decode_num_accepted_tokens_total": 15.0}
    )
    assert spec is not None and spec["server"] == "toyserve" and spec["acceptance_rate"] == 0.5
    with pytest.raises(ValueError, match="built-in"):
        server_dialects.register(Dialect("vllm", "another vLLM"))


def test_without_it_the_server_is_unknown_and_the_builtins_keep_their_precedence() -> None:
    assert server_kind({"owned_by": ["toyserve"]}) == "unknown"
    assert server_kind({"owned_by": ["me"]}) == "llama-cpp-python"
    # A page with vLLM's counters and llama.cpp's: vLLM's are read (the sim publishes vLLM's names).
    both = {"vllm:prefix_cache_hits_total": 1.0, "vllm:prefix_cache_queries_total": 2.0}
    both |= {"llamacpp:prompt_tokens_cached_total": 5.0, "llamacpp:prompt_tokens_total": 5.0}
    later = {k: v * 3 for k, v in both.items()}
    got = hit_rate([{"ok": True, "series": both}, {"ok": True, "series": later}])
    assert got is not None and got["source"].startswith("vllm:") and got["hit_rate"] == 0.5
    only_llama = {k: v for k, v in later.items() if k.startswith("llamacpp")}
    got = hit_rate(
        [
            {"ok": True, "series": {k: v for k, v in both.items() if k.startswith("llamacpp")}},
            {"ok": True, "series": only_llama},
        ]
    )
    assert got is not None and got["source"].startswith("llamacpp:") and got["prompt_tokens"] == 20
