"""Secrets scrubbed at the edge: any text that came from a server passes through `scrub` before it is printed,
logged or written, so an API key a server echoes back (in an error body, a header, an SSE error event, its log)
never reaches the screen or a run file.

`scrub(text, secrets)` replaces every occurrence of each known secret (the run's API key) and the value of any
`Authorization: ...` / `Bearer ...` / `api_key=...` / `x-api-key: ...` it finds, whatever the key. Wherever a
server's text is shortened, `excerpt` scrubs it before it cuts it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, TextIO

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
    text = scrub_known(text, known_forms(secrets))
    text = _CREDENTIAL.sub(lambda m: f"{m.group('name')}{m.group('sep')}{REDACTED}", text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


def excerpt(text: str | None, limit: int, secrets: Iterable[str | None] = (), one_line: bool = True) -> str:
    """A server's text shortened for a line or a record: scrubbed first (`scrub`), then squeezed onto one line
    (unless `one_line` is False) and cut to `limit` characters ending in "…"; cutting first could leave the head
    of a key that straddles the cut, which no later scrub recognises."""
    text = scrub(text or "", secrets)
    if one_line:
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def known_forms(secrets: Iterable[str | None]) -> tuple[str, ...]:
    """Each secret as written raw and as it appears inside a JSON string (a `/` or `"` escaped), longest first."""
    import json

    forms: set[str] = set()
    for s in secrets:
        if s and len(s) >= 4:
            forms |= {s, json.dumps(s)[1:-1], s.replace("/", "\\/")}
            # A key with whitespace inside or around it: a server may strip, squeeze or split it (a header's value
            # is stripped; `Bearer a b` reads as the token `a`), so each piece of 8 or more characters goes too.
            pieces = s.split()
            if len(pieces) > 1 or (pieces and pieces[0] != s):
                forms |= {p for p in pieces if len(p) >= 8} | {
                    f for p in pieces if len(p) >= 8 for f in (json.dumps(p)[1:-1], p.replace("/", "\\/"))
                }
    return tuple(sorted(forms, key=len, reverse=True))


def scrub_known(text: str, forms: tuple[str, ...]) -> str:
    """`text` with each of `forms` (from `known_forms`) replaced: exact matches only, so an answer's own code that
    mentions `api_key=` is kept as it was, and a run file's JSON stays valid."""
    for form in forms:
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def scrub_tree(value: Any, secrets: Iterable[str | None] = ()) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings) with every string passed through `scrub`."""
    secrets = tuple(secrets)
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {scrub(str(k), secrets) if isinstance(k, str) else k: scrub_tree(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub_tree(v, secrets) for v in value)
    return value


class ScrubbingWriter:
    """A text stream in front of another (stdout, stderr) that writes every text through `scrub`: the last edge
    before the screen, for whatever a command prints."""

    def __init__(self, inner: TextIO, secrets: Iterable[str | None]) -> None:
        self._inner = inner
        self._secrets = tuple(s for s in secrets if s)

    def write(self, text: str) -> int:
        """Write `text`, scrubbed; returns the length given (what callers count on)."""
        self._inner.write(scrub(text, self._secrets))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
