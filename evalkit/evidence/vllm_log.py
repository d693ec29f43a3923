"""vLLM's own log lines, known by their wording: evidence of what it did with each request, not errors.

vLLM (0.32, `--enable-log-requests`) writes `[(APIServer pid=N)] LEVEL MM-DD HH:MM:SS [file.py:line] message`. The
lines below are INFO/WARNING of a healthy server: a request received (with its prompt, whose text may hold any word,
"Traceback" or "ERROR" included), added to the engine, aborted on a client's disconnect ("Aborted request(s) id."),
finished, the engine's periodic throughput line, and uvicorn's access line. server_log.py gives such a line no
problem flag (traceback, error, ...); the evidence flag `cancel` stays on an abort. A real traceback (its
`Traceback (most recent call last):` line, written without vLLM's prefix) is still flagged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The prefix of every line vLLM's logger writes (the process tag appears in 0.10 and later).
_PREFIX = re.compile(
    r"^(?:\(\w+ pid=\d+\)\s+)?(?P<level>DEBUG|INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]+\] "
)


@dataclass(frozen=True)
class KnownLine:
    """One kind of vLLM line: its name, the message's pattern (group 1: the request id, where it names one)."""

    name: str
    pattern: re.Pattern[str]


KNOWN: tuple[KnownLine, ...] = tuple(
    KnownLine(name, re.compile(rx))
    for name, rx in (
        ("request_received", r"^Received request (\S+?):"),
        ("request_added", r"^Added request (\S+?)\.?$"),
        ("request_aborted", r"^Aborted request(?:\(s\)|s)? (\S+?)\.?$"),
        ("request_aborted", r"^Request (\S+) aborted\.$"),
        ("request_finished", r"^Finished request (\S+?)\.?$"),
        (
            "engine_stats",
            r"Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: [\d.]+ tokens/s, "
            r"Running: \d+ reqs, Waiting: \d+ reqs",
        ),
    )
)
# uvicorn's access line, under the same prefix-less "INFO:" vLLM's API server prints it with.
_ACCESS = re.compile(r'^INFO:\s+[\d.:\[\]a-f]+ - "(?:GET|POST|PUT|DELETE) \S+ HTTP/[\d.]+" \d{3}')


@dataclass(frozen=True)
class VllmLine:
    """A known vLLM line: its kind, level, and the request id it names (None for engine-wide lines)."""

    name: str
    level: str
    request_id: str | None
    message: str


def known_line(line: str) -> VllmLine | None:
    """The known vLLM line this is, or None (an unknown line, an ERROR, a traceback's lines)."""
    if _ACCESS.match(line):
        return VllmLine("http_access", "INFO", None, line)
    m = _PREFIX.match(line)
    if m is None:
        return None
    message = line[m.end() :].rstrip()
    for k in KNOWN:
        if km := k.pattern.search(message):
            rid = km.group(1) if km.groups() else None
            return VllmLine(k.name, m.group("level"), rid, message)
    return None
