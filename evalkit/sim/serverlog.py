"""The sim's own server log: plain lines in the style real servers write, for `--server-log` to follow.

Real servers tell their causes in log lines (llama.cpp's `stop: cancel task`, FastLLM's clamp line); the sim writes
the same kind of line at the moment its engine does the thing, so evalkit's log evidence is tested against truth.
Each line is flushed as written, as a real server's log is when it is a file.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TextIO


class SimLog:
    """Appends lines to a log file (or nowhere when no path is given); safe to call from any thread."""

    def __init__(self, path: Path | str | None, stamps: bool = False) -> None:
        self._lock = threading.Lock()
        self._stamps = stamps
        self._t0 = time.monotonic()
        self._fh: TextIO | None = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - open for the sim's life; close() ends it

    @property
    def enabled(self) -> bool:
        """Whether lines go anywhere."""
        return self._fh is not None

    def write(self, line: str) -> None:
        """One log line (no trailing newline needed), flushed at once."""
        if self._fh is None:
            return
        with self._lock:
            if self._stamps:  # llama.cpp's own prefix (common/log.cpp): minutes.seconds.ms.us since the log began
                us = int((time.monotonic() - self._t0) * 1e6)
                line = f"{us // 60_000_000}.{us // 1_000_000 % 60:02d}.{us // 1000 % 1000:03d}.{us % 1000:03d} I {line}"
            self._fh.write(line.rstrip("\n") + "\n")
            self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
