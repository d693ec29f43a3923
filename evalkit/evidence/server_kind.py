"""Which server evalkit is talking to, and the advice that fits it: never another server's flags.

The kind comes from what the server says about itself (evalkit.evidence.server_identity: llama.cpp's /props, vLLM's
/version, SGLang's /server_info, the `owned_by` of its /v1/models entries, the title and routes of a FastAPI
server's /openapi.json). Advice is looked up by (kind, topic); a kind with no advice for a topic gets the plain fact.
"""

from __future__ import annotations

from typing import Any

KINDS = ("llama.cpp", "vllm", "sglang", "fastllm", "llama-cpp-python", "transformers", "unknown")
LABELS = {
    "llama.cpp": "llama.cpp llama-server",
    "vllm": "vLLM",
    "sglang": "SGLang",
    "fastllm": "FastLLM ftllm server",
    "llama-cpp-python": "llama-cpp-python llama_cpp.server",
    "transformers": "transformers serve",
    "unknown": "this server",
}
_OWNED_BY = {
    "llamacpp": "llama.cpp",
    "vllm": "vllm",
    "sglang": "sglang",
    "fastllm": "fastllm",
    "me": "llama-cpp-python",
}


def server_kind(identity: dict[str, Any] | None) -> str:
    """One of KINDS, from a `server_identity` record."""
    ident = identity or {}
    kind = ident.get("server_type")
    if kind in KINDS:
        return str(kind)
    for owner in ident.get("owned_by") or []:
        if owner in _OWNED_BY:
            return _OWNED_BY[owner]
    api = ident.get("openapi") or {}
    title = str(api.get("title") or "")
    paths = set(api.get("paths") or [])
    if "llama.cpp" in title or "/extras/tokenize" in paths:
        return "llama-cpp-python"
    # transformers serve's FastAPI app: chat completions beside the Responses API or audio transcription, and none
    # of the tokenize, version or metrics routes vLLM and SGLang add.
    if (
        "/v1/chat/completions" in paths
        and paths & {"/v1/responses", "/v1/audio/transcriptions"}
        and not paths & {"/tokenize", "/version", "/metrics", "/extras/tokenize"}
    ):
        return "transformers"
    return "unknown"


# (kind, topic) -> advice; topics: metrics, tokenize, props, ignore_eos, usage, request_id, request_echo, timings,
# field.
_ADVICE: dict[tuple[str, str], str] = {
    ("llama.cpp", "metrics"): "start llama-server with --metrics",
    ("llama.cpp", "props"): "llama-server serves /props; an old build or a proxy in front may not",
    ("llama.cpp", "timings"): "llama-server sends timings in every stream; an old build may not",
    ("llama.cpp", "ignore_eos"): "llama-server honours ignore_eos; check the build",
    ("vllm", "metrics"): "vLLM serves /metrics on its API port; a proxy in front may not pass it",
    ("vllm", "tokenize"): "vLLM serves POST /tokenize; a build behind a proxy may not pass it",
    ("vllm", "field"): "vLLM refuses fields its request model does not define: check the name against its "
    "sampling parameters",
    ("vllm", "request_echo"): "start vLLM with --enable-request-id-headers (it then echoes X-Request-Id) and "
    "--enable-log-requests (its log names each request and each abort), so its log lines match evalkit's requests",
    ("vllm", "timings"): "vLLM sends no timings: its /metrics histograms and counters are the server's figures",
    ("sglang", "metrics"): "start SGLang with --enable-metrics",
    ("sglang", "usage"): "SGLang sends usage with stream_options.include_usage; an old build may not",
    ("fastllm", "metrics"): "FastLLM's ftllm server has no /metrics: evalkit's figures are the client's",
    ("fastllm", "tokenize"): "FastLLM's ftllm server has no tokenize endpoint: stress counts from usage",
    ("fastllm", "ignore_eos"): "FastLLM ignores ignore_eos: generations may end before --gen-tokens",
    ("llama-cpp-python", "metrics"): "llama-cpp-python's server has no /metrics",
    ("llama-cpp-python", "tokenize"): "llama-cpp-python serves POST /extras/tokenize",
    ("llama-cpp-python", "request_id"): "llama-cpp-python takes only a UUID X-Request-Id; evalkit sends UUIDs",
    ("llama-cpp-python", "ignore_eos"): "llama-cpp-python does not honour ignore_eos",
    ("transformers", "metrics"): "transformers serve has no /metrics: stress verdicts rest on the client's timing",
    ("transformers", "tokenize"): "transformers serve has no tokenize endpoint: stress counts long prompts from usage",
    ("transformers", "props"): "transformers serve has no /props",
    ("transformers", "ignore_eos"): "transformers serve refuses fields OpenAI does not define (HTTP 422): evalkit "
    "does not send them and lets prompts run to max_tokens",
    ("transformers", "field"): "transformers serve refuses fields OpenAI does not define (HTTP 422)",
    ("transformers", "timings"): "transformers serve sends no server timings",
}
_PLAIN = {
    "metrics": "the server does not serve /metrics",
    "tokenize": "the server serves none of the tokenize forms evalkit knows",
    "props": "the server does not serve /props",
    "timings": "the server sends no timings",
    "ignore_eos": "the server does not force a length with ignore_eos",
    "usage": "the server sends no usage in the stream",
    "request_id": "the server does not take evalkit's X-Request-Id",
    "request_echo": "the server does not echo X-Request-Id: its log lines are matched to requests by time only",
    "field": "the server refuses this field",
}


def advice(kind: str | None, topic: str) -> str:
    """What to do (or know) about `topic` on this kind of server."""
    return _ADVICE.get((kind or "unknown", topic)) or _PLAIN.get(topic, "")
