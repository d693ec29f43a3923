"""Ray, imported only where a command was given `--ray` (`sweep --ray`, `load --ray`): without it installed, one line
naming the extra that brings it."""

from __future__ import annotations

import os
import sys
from typing import Any

from evalkit.errors import UsageError


def import_ray() -> Any:
    """The `ray` module, or one line naming the extra that brings it.

    The points' and hosts' lines reach this process through Ray (issue #58): each one as its task printed it, not
    folded by Ray's deduplication into another task's line with a green `[repeated 2x across cluster]` (two points'
    `stress exit 0 (7.9 s)` and `(8.4 s)` read as one), and in a log without Ray's colour codes. Ray reads these
    settings when it is imported; a value the user set is kept."""
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    if not sys.stdout.isatty():
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'evalkit[cluster]'") from None
    return ray


def reachable(address: str, timeout_s: float = 5.0) -> None:
    """One line (exit 2) when nothing answers at `address`'s host and port within `timeout_s`: Ray itself retries
    an address that refuses for minutes, deaf to SIGTERM (issue #56). `auto` and `local` are not checked."""
    import socket
    from urllib.parse import urlsplit

    if address in ("auto", "local"):
        return
    try:
        parts = urlsplit(address if "://" in address else f"ray://{address}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise UsageError(f"--ray {address}: give auto, or the cluster's HOST:PORT (ray://HOST:PORT)")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        why = "connection refused" if isinstance(e, ConnectionRefusedError) else (e.strerror or type(e).__name__)
        raise UsageError(f"--ray {address}: no Ray cluster answered ({why} at {host}:{port})") from None


def connect(ray: Any, address: str) -> None:
    """Join the cluster at `address` (`auto`: the local one), or one line saying none answered."""
    if ray.is_initialized():
        return
    reachable(address)
    try:
        ray.init(address=address, log_to_driver=True, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UsageError(f"--ray {address}: no Ray cluster answered ({str(e).splitlines()[0]})") from None
