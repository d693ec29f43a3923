"""Which server evalkit is talking to, and the advice that fits it: never another server's flags.

The kind comes from what the server says about itself (evalkit.evidence.server_identity: llama.cpp's /props, vLLM's
/version, SGLang's /server_info, the `owned_by` of its /v1/models entries, the title and routes of a FastAPI
server's /openapi.json). Advice is looked up by (kind, topic) in evalkit.evidence.server_dialects; a kind with no
advice for a topic gets the plain fact.
"""

from __future__ import annotations

from evalkit.client.identity_json import ServerIdentity
from evalkit.evidence.server_dialects import dialect, dialects, kind_owning


def kinds() -> tuple[str, ...]:
    """Every kind of server evalkit knows, `unknown` last."""
    return tuple(d.kind for d in dialects())


def label(kind: str) -> str:
    """A kind's name in words ("vLLM")."""
    return dialect(kind).label


def server_kind(identity: ServerIdentity | None) -> str:
    """One of `kinds()`, from a `server_identity` record."""
    ident: ServerIdentity = identity or {"server_type": None, "probed": {}}
    kind = ident.get("server_type")
    if kind in kinds():
        return str(kind)
    for owner in ident.get("owned_by") or []:
        owning = kind_owning(str(owner))
        if owning is not None:
            return owning
    api = ident.get("openapi")
    title = str((api.get("title") if api else None) or "")
    paths = set((api.get("paths") if api else None) or [])
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
    return dialect(kind or "unknown").advice.get(topic) or _PLAIN.get(topic, "")
