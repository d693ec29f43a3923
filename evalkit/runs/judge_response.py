"""Judging one response (stress and load): an error of some kind, a wrong answer, or correct.

Error kinds: `http` (an HTTP error status), `broken_stream` (the stream or connection broke), `timeout`,
`empty` (a finished request with no content: servers have returned empty answers under concurrency),
`killed_stream` (HTTP 200, then the stream ended with no content and no finish_reason: llama-cpp-python's server
ends the stream in progress when a new request arrives; the runner also counts a stream cut after content as one
when the preflight saw the server kill streams and another request was in flight when it ended) and `cancelled` (a
request cut short that was not planned to be).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalkit.runs.records import RequestRecord

_INT_RE = re.compile(r"-?\d[\d,]*")
_CODE_RE = re.compile(r"[A-Z0-9]+(?:-[A-Z0-9]+)+")
_LIST_RE = re.compile(r"^\s*(\d+(?:\s*,\s*\d+)*)")


@dataclass(frozen=True)
class RequestVerdict:
    """The outcome of one request, the error kind when it failed, and what was read as its answer."""

    outcome: str
    error_kind: str | None = None
    extracted: str | None = None


def error_kind(rec: RequestRecord) -> str | None:
    """The kind of failure a record shows, or None when the request finished with content."""
    if rec.status == "timeout":
        return "timeout"
    if rec.status == "cancelled":
        return "cancelled"
    if rec.status == "error":
        if rec.http_status is not None and rec.http_status >= 400:
            return "http"
        if (
            rec.http_status == 200
            and rec.finish_reason is None
            and not (rec.content or rec.reasoning)
            and "without a finish_reason" in (rec.error or "")
        ):
            return "killed_stream"
        return "broken_stream"
    if not (rec.content or "").strip():
        return "empty"
    return None


def extract_short(content: str) -> str | None:
    """The last integer in a short answer (thousands separators allowed)."""
    found = _INT_RE.findall(content)
    if not found:
        return None
    return str(found[-1]).replace(",", "")


def extract_code(content: str) -> str | None:
    """The first secret-code-shaped token in a long answer."""
    m = _CODE_RE.search(content)
    return m.group(0) if m else None


def extract_count(content: str) -> str | None:
    """The leading comma-separated number list of a generation, normalised to `1, 2, ...`."""
    m = _LIST_RE.match(content)
    if not m:
        return None
    return ", ".join(x.strip() for x in m.group(1).split(","))


def judge(rec: RequestRecord, role: str, expected: str, planned_cancel: bool) -> RequestVerdict:
    """Error, wrong or correct for a request of `role` whose answer should be `expected`."""
    kind = error_kind(rec)
    if planned_cancel:
        # The cancelled long request has nothing to check; only a failure before the cancel is an error.
        if kind in (None, "cancelled", "empty"):
            return RequestVerdict("cancelled_as_planned")
        return RequestVerdict("error", kind)
    if kind is not None:
        return RequestVerdict("error", kind)
    content = rec.content or ""
    if role == "short":
        got = extract_short(content)
        return RequestVerdict("correct" if got == expected else "wrong", extracted=got)
    if role == "long":
        got = extract_code(content)
        return RequestVerdict("correct" if got == expected else "wrong", extracted=got)
    got = extract_count(content)
    # The whole list must match: a longer count delivered to this request starts with this one's answer.
    return RequestVerdict("correct" if got == expected else "wrong", extracted=None if got is None else got[:40])
