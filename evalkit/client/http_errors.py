"""One line for an HTTP error: the server's status, the first 300 characters of its body, and a hint when evalkit
knows the cause (a field it rejects, a model it does not serve, a context too long, a request id it will not take).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from evalkit.redact import excerpt, scrub

BODY_CHARS = 300

# (pattern on the body, hint). The first match wins; `{field}` / `{model}` are filled from the request.
_FIELD = re.compile(
    r"""(?:extra (?:inputs|fields?)|unrecognized|unknown|unsupported|unexpected)[^'"`]{0,40}"""
    r"""['"`]([A-Za-z_][\w.]*)['"`]""",
    re.I,
)
_FIELD_FIRST = re.compile(
    r"""['"`]([A-Za-z_][\w.]*)['"`][^'"`]{0,40}(?:not permitted|not allowed|not supported|"""
    r"""is not a valid|unrecognized|unknown)""",
    re.I,
)
_FIELD_BARE = re.compile(r"(?:argument|field|parameter)s? supplied:?\s*['\"`]?([A-Za-z_][\w.]*)", re.I)
# pydantic's error list (vLLM, SGLang, FastAPI servers): {'type': 'extra_forbidden', 'loc': ('body', 'top_k'), ...}
_FIELD_LOC = re.compile(
    r"""extra_forbidden.{0,80}?['"]loc['"]\s*:\s*[\[(]\s*['"]body['"]\s*,\s*['"]([\w.]+)""", re.I | re.S
)
_MODEL = re.compile(r"model[^.]{0,60}(?:not found|does not exist|not served|unknown|is not available)", re.I)
_CONTEXT = re.compile(
    r"context (?:length|window|size)|n_ctx|maximum context|too many tokens|prompt is too long"
    r"|exceeds? the (?:available )?context|max_model_len",
    re.I,
)


def body_excerpt(text: str | None, secrets: Iterable[str | None] = ()) -> str:
    """The body scrubbed, squeezed onto one line and cut to 300 characters (`redact.excerpt`), or "empty body"."""
    return excerpt(text, BODY_CHARS, secrets) or "empty body"


def is_uuid(value: str) -> bool:
    """Whether `value` parses as a UUID (what llama-cpp-python's request-id middleware demands)."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def hint(
    status: int, body: str | None, request: dict[str, Any] | None = None, request_id: str | None = None
) -> str | None:
    """What evalkit knows about this refusal, or None."""
    text = body or ""
    request = request or {}
    m = _FIELD_LOC.search(text) or _FIELD.search(text) or _FIELD_FIRST.search(text) or _FIELD_BARE.search(text)
    if m and m.group(1) in request:
        return f"the server rejects the request field '{m.group(1)}'"
    if _MODEL.search(text):
        return f"the server does not serve model '{request.get('model')}'; pass --model with an id from GET /v1/models"
    if _CONTEXT.search(text):
        return "the prompt is too long for the server's context; start it with a larger context or send less"
    if m:
        return f"the server rejects the field '{m.group(1)}'"
    if status == 400 and not text.strip() and request_id is not None and not is_uuid(request_id):
        # starlette-context's RequestIdPlugin (llama-cpp-python's server) answers a bare 400 to such a header.
        return (
            "the server may demand a UUID in X-Request-Id (llama-cpp-python does); `evalkit check` tells, "
            "and evalkit then sends UUID request ids"
        )
    return None


def describe(
    status: int,
    body: str | None,
    request: dict[str, Any] | None = None,
    request_id: str | None = None,
    secrets: Iterable[str | None] = (),
) -> str:
    """`HTTP <status>: <body excerpt>[ (hint: ...)]`, the body scrubbed of `secrets` and any credential first
    (before the cut, so no half of a key is left)."""
    body = scrub(body or "", secrets)
    line = f"HTTP {status}: {body_excerpt(body)}"
    why = hint(status, body, request, request_id)
    return f"{line} (hint: {why})" if why else line
