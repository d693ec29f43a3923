"""Progress of a long command on standard error: tqdm's bar on a terminal; in a log or CI (standard error not a
terminal), a line at least every `interval_s` seconds (default 25, `$EVALKIT_PROGRESS_INTERVAL_S`) with what is done
of the total, the time so far and an estimate of the time left, so a run is never silent for long.

The line comes from a timer thread, not from the work: a question that takes minutes still gets its lines.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

DEFAULT_INTERVAL_S = 25.0  # under the 30 s a log may stay silent, with room for a busy machine
ENV_INTERVAL = "EVALKIT_PROGRESS_INTERVAL_S"


def interval_s() -> float:
    """Seconds between progress lines in a log (`$EVALKIT_PROGRESS_INTERVAL_S`, else 25)."""
    try:
        v = float(os.environ.get(ENV_INTERVAL, ""))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return v if 0 < v < float("inf") else DEFAULT_INTERVAL_S


def duration(s: float) -> str:
    """`41 s`, `3 min 05 s`, `1 h 02 min`."""
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


class Progress:
    """A count of done units out of a total, shown as tqdm's bar on a terminal or as timed lines in a log.

    `update(n)`, `set_postfix_str(text)` and `set_description(text)` as tqdm's; `close()` (or leaving the `with`)
    ends it; in a log the last line then says the work is done and how long it took."""

    def __init__(
        self,
        total: int | None,
        desc: str,
        unit: str = "it",
        initial: int = 0,
        enabled: bool = True,
        file: TextIO | None = None,
        interval: float | None = None,
    ) -> None:
        self.file = file if file is not None else sys.stderr
        self.total = total
        self.desc = desc
        self.unit = unit
        self.done = initial
        self.initial = initial
        self.postfix = ""
        self.start = time.monotonic()
        self.interval = interval if interval is not None else interval_s()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.bar = None
        self._closed = False
        if not enabled:
            return
        tty = bool(getattr(self.file, "isatty", lambda: False)())
        if tty:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total, initial=initial, desc=desc, unit=unit, file=self.file, dynamic_ncols=True, leave=True
            )
        else:
            self._thread = threading.Thread(target=self._tick, name=f"progress {desc}", daemon=True)
            self._thread.start()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close(finished=et is None)

    def update(self, n: int = 1) -> None:
        """`n` more units done."""
        with self._lock:
            self.done += n
        if self.bar is not None:
            self.bar.update(n)

    def set_postfix_str(self, text: str) -> None:
        """A few words after the count (e.g. the running accuracy)."""
        self.postfix = text
        if self.bar is not None:
            self.bar.set_postfix_str(text)

    def set_description(self, text: str) -> None:
        """The name before the count (e.g. the stress cycle)."""
        self.desc = text
        if self.bar is not None:
            self.bar.set_description(text)

    def line(self) -> str:
        """The log line: `bench: 12/30 requests (40%), 41 s so far, about 1 min 02 s left`."""
        with self._lock:
            done = self.done
        elapsed = time.monotonic() - self.start
        if self.total:
            count = f"{done}/{self.total} {self.unit} ({100 * done / self.total:.0f}%)"
        else:
            count = f"{done} {self.unit}"
        text = f"{self.desc}: {count}, {duration(elapsed)} so far"
        made = done - self.initial
        if self.total and made > 0 and done < self.total:
            text += f", about {duration(elapsed / made * (self.total - done))} left"
        elif self.total and done < self.total:
            text += ", time left not known yet"
        if self.postfix:
            text += f"; {self.postfix}"
        return text

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._write(self.line())

    def _write(self, text: str) -> None:
        try:
            self.file.write(text + "\n")
            self.file.flush()
        except (OSError, ValueError):  # standard error closed under us: progress is not worth a failure
            pass

    async def follow(self, count: Callable[[], int], every_s: float = 0.5) -> None:
        """Keep the count at `count()` (work that counts itself, e.g. a list of results) until cancelled; never at
        the total before `close()` (an estimated total may be passed)."""
        while True:
            target = count() if self.total is None else min(count(), self.total - 1)
            if target > self.done:
                self.update(target - self.done)
            await asyncio.sleep(every_s)

    def close(self, finished: bool = True) -> None:
        """Stop the bar or the timer; in a log, a last line when the work ran long enough to have had lines."""
        if self._closed:
            return
        self._closed = True
        if self.bar is not None:
            self.bar.close()
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            if finished and time.monotonic() - self.start >= self.interval:
                with self._lock:
                    done = self.done
                total = f"/{self.total}" if self.total else ""
                self._write(
                    f"{self.desc}: done, {done}{total} {self.unit} in {duration(time.monotonic() - self.start)}"
                )
