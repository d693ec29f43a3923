"""`--server-log FILE`: follow the server's log during a run, keep each line in `server_log.jsonl`, flag known ones.

Each line of `server_log.jsonl` is `{"t": <epoch when evalkit read it>, "t_after": <epoch of the read before, which
did not see it yet>, "line": "<text>", "flags": [<names>]}`: the server wrote the line in (t_after, t]. vLLM's DEBUG
lines that quote a whole request (`Request … details: prompt: …`, `Request … JSON body: …`) are kept without the
prompt (evidence/vllm_steps.py: their head and the prompt's token count).
Following starts at the file's end when the run starts; of the lines already there only flagged ones are kept, with
`"earlier": true` (a server's start-up lines, such as FastLLM's clamp, come before any run). A file that does
not exist yet is warned about once and polled for, and then read from its start. A file cut shorter (rotated,
truncated) is read again from its start. Flag patterns are regular expressions by name: the defaults below for
FastLLM, vLLM, SGLang and llama.cpp, overridden or extended by a server profile's `log_patterns` in evalkit.toml
(a pattern set to "" is switched off).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from evalkit.clock import Clock
from evalkit.evidence.log_lines import LogLine
from evalkit.evidence.vllm_log import known_line
from evalkit.evidence.vllm_steps import without_prompt
from evalkit.redact import excerpt, scrub

LOG_FILE = "server_log.jsonl"
POLL_S = 0.05
EARLIER_BYTES = 4 * 1024 * 1024  # how far back flagged lines from before the run are looked for

# name -> regex; one table for every server since a log line names its server well enough, and a run does not
# always know which server it talks to. The comment says whose line each one is modelled on.
DEFAULT_PATTERNS: dict[str, str] = {
    # FastLLM: the silent concurrency clamp of the write-up, and its per-session context line.
    "batch_clamp": r"max_batch limited \d+ -> \d+",
    "context_per_request": r"(?i)context window: \d+ tokens per session|n_ctx_slot\s*=\s*\d+|"
    r"maximum model length|max_model_len\s*[=:]?\s*\d+|max_total_num_tokens\s*=\s*\d+",
    # Every server: CUDA faults and memory. The first CUDA error is the one to read (write-up, CUDA graph crash).
    "cuda_error": r"(?i)CUDA error|cudaError\w*|illegal memory access|CUBLAS_STATUS_\w+|NCCL (?:error|WARN)",
    "out_of_memory": r"(?i)out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|failed to allocate",
    # A process's own abort prints "Aborted" alone (or "... (core dumped)"); vLLM's INFO "Aborted request(s) id."
    # is a client's disconnect, not a crash (issue 40).
    "traceback": r"Traceback \(most recent call last\)|(?i:segmentation fault)|core dumped|^\s*Aborted\s*$|"
    r"terminate called after throwing",
    # Requests over the context: vLLM/SGLang reject with "maximum context length", llama.cpp "exceeds ... context".
    "context_exceeded": r"(?i)maximum context length|exceeds the available context size|"
    r"context (?:length|size) exceeded|input is too long",
    # vLLM / SGLang scheduler pressure.
    "preemption": r"(?i)preempt(?:ed|ion)",
    "kv_cache_full": r"(?i)no (?:free|available) (?:kv )?(?:cache )?(?:slots|blocks)|KV cache is full",
    # llama.cpp cancel and slot lines, so a cancel's effect can be read next to the requests.
    "cancel": r"stop: cancel task|request cancelled|Aborted request",
    "error": r"(?:^|\s)(?:ERROR|FATAL|CRITICAL)(?:\s|:|\])|\berror:",
}


# Flags that say what the server did, not that something went wrong: kept on vLLM's known lines.
EVIDENCE_FLAGS = frozenset({"cancel", "preemption", "kv_cache_full", "context_per_request", "batch_clamp"})


@dataclass(frozen=True)
class LogPatterns:
    """Compiled flag patterns by name."""

    compiled: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def from_profile(cls, overrides: Mapping[str, str] | None = None) -> LogPatterns:
        """The defaults, with a profile's `log_patterns` replacing or adding names ("" switches one off)."""
        merged = {**DEFAULT_PATTERNS, **(overrides or {})}
        return cls(tuple((name, re.compile(rx)) for name, rx in merged.items() if rx))

    def flags(self, line: str) -> list[str]:
        """Names of the patterns the line matches; a known vLLM INFO/WARNING line (evidence/vllm_log.py, whose
        text may quote a prompt) gets only the evidence flags, never a problem one."""
        names = [name for name, rx in self.compiled if rx.search(line)]
        if names and known_line(line) is not None:
            return [n for n in names if n in EVIDENCE_FLAGS]
        return names


class LogFollower:
    """A thread that tails one file every ~50 ms and hands each new line to `emit` with its read time and flags."""

    def __init__(
        self,
        path: Path | str,
        clock: Clock,
        patterns: LogPatterns,
        emit: Callable[[str, LogLine], None],
        warn: Callable[[str], None] | None = None,
        poll_s: float = POLL_S,
        secrets: tuple[str | None, ...] = (),
    ) -> None:
        self.path = Path(path)
        self.secrets = secrets  # a server's log may print request headers: each line is scrubbed as it is read
        self.clock = clock
        self.patterns = patterns
        self._emit = emit
        self._warn = warn or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pos: int | None = None
        self._partial = b""
        self.lines = 0
        self._seen_at = clock.now()  # when the file was last read: lines read next were written after it

    def start(self) -> None:
        """Keep the flagged lines already in the file (marked `earlier`), then follow from its end."""
        try:
            self._pos = self.path.stat().st_size
            self._scan_earlier(self._pos)
        except FileNotFoundError:
            self._warn(f"warning: server log {self.path} does not exist yet; following it when it appears")
            self._pos = None
        self._thread = threading.Thread(target=self._loop, name="server-log", daemon=True)
        self._thread.start()

    def _scan_earlier(self, end: int) -> None:
        # A server's start-up lines (FastLLM's clamp, its context per session) come before any run starts; they
        # are kept when flagged, marked as earlier, since the file may also hold older server starts.
        with open(self.path, "rb") as f:
            f.seek(max(0, end - EARLIER_BYTES))
            data = f.read(end - f.tell())
        for raw in data.split(b"\n")[1 if end > EARLIER_BYTES else 0 :]:
            line = scrub(without_prompt(raw.decode("utf-8", errors="replace").rstrip("\r")), self.secrets)
            flags = self.patterns.flags(line)
            if flags:
                self._emit(LOG_FILE, {"t": self.clock.now(), "line": line, "flags": flags, "earlier": True})

    def stop(self) -> None:
        """Read what is left (a last line without newline included) and stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._partial:
            self._write(self._partial)
            self._partial = b""

    def _loop(self) -> None:
        while True:
            stopping = self._stop.is_set()
            self._read_new()
            if stopping:
                return
            self._stop.wait(self._poll_s)

    def _read_new(self) -> None:
        polled = self.clock.now()
        after, self._seen_at = self._seen_at, polled
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if self._pos is None or size < self._pos:
            self._pos, self._partial = 0, b""  # appeared after the start, or was truncated/rotated
        if size == self._pos:
            return
        with open(self.path, "rb") as f:
            f.seek(self._pos)
            data = f.read()
        self._pos += len(data)
        chunks = (self._partial + data).split(b"\n")
        self._partial = chunks.pop()
        for raw in chunks:
            self._write(raw, after)

    def _write(self, raw: bytes, after: float | None = None) -> None:
        line = scrub(without_prompt(raw.decode("utf-8", errors="replace").rstrip("\r")), self.secrets)
        self.lines += 1
        row: LogLine = {"t": self.clock.now(), "line": line, "flags": self.patterns.flags(line)}
        if after is not None:
            row["t_after"] = after
        self._emit(LOG_FILE, row)


class FlaggedLine(TypedDict):
    """One flagged line as `server_log.flagged_lines` lists it."""

    t: float
    line: str
    flags: list[str]
    earlier: bool


class LogSummary(TypedDict):
    """summary.json's `server_log` (`summarize_log`), in the order written."""

    path: str | None
    lines: int
    flagged: int
    flagged_earlier: int
    flag_counts: dict[str, int]
    flagged_lines: list[FlaggedLine]


def summarize_log(lines: list[LogLine], path: str | None = None, limit: int = 50) -> LogSummary:
    """summary.json's `server_log`: line counts, counts per flag, and the flagged lines (first `limit`)."""
    flagged = [ln for ln in lines if ln.get("flags")]
    during = [ln for ln in lines if not ln.get("earlier")]
    counts: dict[str, int] = {}
    for ln in flagged:
        for name in ln["flags"]:
            counts[name] = counts.get(name, 0) + 1
    return {
        "path": path,
        "lines": len(during),
        "flagged": len(flagged),
        "flagged_earlier": sum(1 for ln in flagged if ln.get("earlier")),
        "flag_counts": dict(sorted(counts.items())),
        "flagged_lines": [
            {
                "t": ln["t"],
                "line": excerpt(ln["line"], 500, one_line=False),
                "flags": ln["flags"],
                "earlier": bool(ln.get("earlier")),
            }
            for ln in flagged[:limit]
        ],
    }
