"""One `evalkit sweep` writes a sweep directory at a time: a record lock on `SWEEP/.sweep.lock`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evalkit.errors import UsageError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock, as run directories
    fcntl = None  # type: ignore[assignment]  # the module's absence is the signal

LOCK = ".sweep.lock"


@contextmanager
def hold_sweep_dir(sweep_dir: Path) -> Iterator[None]:
    """Hold the sweep directory's lock for the block; a second sweep on it is a usage error (exit 2)."""
    if fcntl is None:
        yield
        return
    fd = os.open(Path(sweep_dir) / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UsageError(f"{sweep_dir} is being run by another evalkit sweep; wait for it to end") from None
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)
