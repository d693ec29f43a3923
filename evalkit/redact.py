"""Secrets scrubbed at the edge: any text that came from a server passes through `scrub` before it is printed,
logged or written, so an API key a server echoes back (in an error body, a header, an SSE error event, its log)
never reaches the screen or a run file.

`scrub(text, secrets)` replaces every occurrence of each known secret (the run's API key) and the value of any
`Authorization: ...` / `Bearer ...` / `api_key=...` / `x-api-key: ...` it finds, whatever the key.
"""

from __future__ import annotations

import re
from typing import Iterable

REDACTED = "[redacted]"

# Values that carry credentials whatever their owner: `Authorization: Bearer X`, `"authorization": "Basic X"`,
# a bare `Bearer X`, `api_key=X`, `"x-api-key": "X"`, `?key=X`. The value stops at a quote, space, comma or brace.
_CREDENTIAL = re.compile(
    r"""(?ix)
    (?P<name>authorization|proxy-authorization|x-api-key|api[-_]?key|access[-_]?token|secret)
    (?P<sep>["']?\s*[:=]\s*["']?)
    (?:(?:bearer|basic|token)\s+)?
    (?P<value>[^\s"',;}&]+)
    """
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+([A-Za-z0-9._~+/=-]{4,})")


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with each of `secrets` and every credential-looking value replaced by `[redacted]`."""
    if not text:
        return text
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _CREDENTIAL.sub(lambda m: f"{m.group('name')}{m.group('sep')}{REDACTED}", text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
