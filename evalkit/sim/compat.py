"""Refusals real servers make, switched on by sim flags so `evalkit check` and the client can be tested on them.

- `uuid_request_ids`: llama-cpp-python's request-id middleware (starlette-context) answers a bare HTTP 400,
  empty body, to an `X-Request-Id` that is not a UUID.
- `reject_fields`: an OpenAI-style server that refuses body fields it does not know, naming the field.
- `strict_fields`: a server whose request model forbids extra fields (pydantic `extra="forbid"`, as transformers
  serve): HTTP 422 with FastAPI's error list naming each field OpenAI's chat API does not define.
- `pin_model`: a server that serves one model and answers HTTP 400 to a request naming another.
- `context_tokens`: a prompt longer than the context is answered HTTP 400 in vLLM's words.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from evalkit.client.tokens import prompt_tokens
from evalkit.sim.settings import SimSettings

# The body fields of OpenAI's chat completions API (openai-python's CompletionCreateParams): a strict server takes
# these and refuses any other.
OPENAI_CHAT_FIELDS = frozenset(
    (
        "messages",
        "model",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    )
)


def strict_refusal(body: dict[str, Any]) -> str | None:
    """FastAPI's 422 body for the fields a request model with `extra="forbid"` refuses, or None."""
    extra = [k for k in body if k not in OPENAI_CHAT_FIELDS]
    if not extra:
        return None
    return json.dumps(
        {
            "detail": [
                {
                    "type": "extra_forbidden",
                    "loc": ["body", k],
                    "msg": "Extra inputs are not permitted",
                    "input": body[k],
                }
                for k in extra
            ]
        }
    )


def refusal(s: SimSettings, request_id: str | None, body: Any) -> tuple[int, str] | None:
    """(status, body text) when the emulated server would refuse this request before serving it, else None."""
    if s.uuid_request_ids and request_id is not None:
        try:
            uuid.UUID(request_id)
        except ValueError:
            return 400, ""
    if s.strict_fields and isinstance(body, dict):
        strict = strict_refusal(body)
        if strict is not None:
            return 422, strict
    if s.pin_model and isinstance(body, dict) and body.get("model") != s.model:
        return 400, json.dumps(
            {
                "error": {
                    "message": f"The model `{body.get('model')}` does not exist; this server serves `{s.model}`",
                    "type": "invalid_request_error",
                    "code": 400,
                }
            }
        )
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        n = prompt_tokens([m for m in body["messages"] if isinstance(m, dict)])
        if n > s.context_tokens:  # vLLM's words for a prompt past the context
            return 400, json.dumps(
                {
                    "error": {
                        "message": f"This model's maximum context length is {s.context_tokens} "
                        f"tokens. However, your request has {n} input tokens.",
                        "type": "BadRequestError",
                        "code": 400,
                    }
                }
            )
    if s.reject_fields and isinstance(body, dict):
        for name in s.reject_fields:
            if name in body:
                return 400, json.dumps(
                    {
                        "error": {
                            "message": f"Unrecognized request argument supplied: {name}",
                            "type": "invalid_request_error",
                            "param": name,
                            "code": None,
                        }
                    }
                )
    return None
