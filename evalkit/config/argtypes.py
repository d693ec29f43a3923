"""Argument types for the command line: numbers that mean something, run names that are one path component; and the
parser every command (and `python -m evalkit.sim`) uses.

Each raises `argparse.ArgumentTypeError`, which argparse reports as `argument --flag: <why>` (exit 2, one line).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

MAX_NAME = 128
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def run_name(text: str) -> str:
    """`--name`: one path component (no `/`, `\\`, `..` or `.`), not empty, no control characters, <= 128 chars."""
    if not text or not text.strip():
        raise argparse.ArgumentTypeError("a run name cannot be empty")
    if text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} is not a run name (it names a directory, not a run)")
    if "/" in text or "\\" in text:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a run name is one path component, without '/' (use --out for the parent directory)"
        )
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text):
        raise argparse.ArgumentTypeError(f"{text!r}: a run name cannot hold control characters")
    if len(text) > MAX_NAME:
        raise argparse.ArgumentTypeError(f"a run name is at most {MAX_NAME} characters (this one has {len(text)})")
    return text


def base_url(text: str) -> str:
    """`--base-url`: an http:// or https:// URL with a host."""
    from urllib.parse import urlsplit

    from evalkit.config.profiles import masked_url

    try:
        parts = urlsplit(text.strip())
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok or any(c.isspace() for c in text.strip()):
        raise argparse.ArgumentTypeError(
            f"{masked_url(text)!r} is not an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1)"
        )
    if "@" in parts.netloc:  # --base-url and --judge-url alike: a password in a URL is sent nowhere, shown everywhere
        raise argparse.ArgumentTypeError(
            f"{masked_url(text)!r} holds a user name or password; evalkit sends no credentials from a URL: drop them, "
            "and name the key's environment variable (--api-key-env, --judge-api-key-env)"
        )
    return text.strip()


def build_info(text: str) -> str:
    """`--build-info`: KEY=VALUE."""
    if "=" not in text or not text.split("=", 1)[0].strip():
        raise argparse.ArgumentTypeError(f"{text!r}: write KEY=VALUE, e.g. commit=a2bf07fd")
    return text


def env_name(text: str) -> str:
    """`--api-key-env`: the name of an environment variable (never the key itself)."""
    if not _ENV_NAME.match(text):
        raise argparse.ArgumentTypeError(
            f"{text[:8]!r}...: give the name of an environment variable (letters, digits, _), not a key"
            if len(text) > 8
            else f"{text!r} is not an environment variable name (letters, digits, _)"
        )
    return text


def _number(cast: Callable[[str], float | int], what: str, ok: Callable[[float], bool]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if isinstance(v, float) and not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (a finite number is needed)")
        if not ok(v):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return v

    parse.__name__ = what.replace(" ", "_")
    return parse


finite_float = _number(float, "a finite number", lambda v: True)
positive_float = _number(float, "a number above 0", lambda v: v > 0)
nonneg_float = _number(float, "a number of 0 or more", lambda v: v >= 0)
fraction = _number(float, "a fraction from 0 to 1", lambda v: 0 <= v <= 1)
positive_int = _number(int, "a whole number of 1 or more", lambda v: v >= 1)
nonneg_int = _number(int, "a whole number of 0 or more", lambda v: v >= 0)
any_int = _number(int, "a whole number", lambda v: True)


def bounded_int(lo: int, hi: int) -> Callable[[str], int]:
    """A whole number from `lo` to `hi` (the documented maximum of a count: docs/conventions.md, "Bounds")."""
    parse = _number(int, f"a whole number from {lo} to {hi:,}", lambda v: lo <= v <= hi)
    return lambda text: int(parse(text))


# Maxima of the counts a user gives (docs/conventions.md, "Bounds"): far above a real run, far below minutes of
# silence or an out-of-memory error while it is planned.
MAX_REQUESTS = 1_000_000  # load: measured requests per point
MAX_USERS = 10_000  # load: conversations, shared-prefix groups, users per group
MAX_TURNS = 1_000  # load: turns per conversation
MAX_RUNS = 10_000  # bench: --runs and --until-sure's --max-runs per prompt
MAX_TIMEOUT_S = 86_400.0  # any per-request or start/stop time limit: one day


timeout_s = _number(float, f"a time limit above 0 and at most {MAX_TIMEOUT_S:g} s", lambda v: 0 < v <= MAX_TIMEOUT_S)


def port(text: str) -> int:
    """A TCP port, 0 (pick a free one) to 65535."""
    v = _number(int, "a port from 0 to 65535", lambda v: 0 <= v <= 65535)(text)
    return int(v)


def writable_file(path: Path, flag: str) -> None:
    """Exit 2 before any work when `path` (an output file) cannot be written: its parent missing-and-uncreatable,
    a directory in its place, or no write permission."""
    from evalkit.errors import UsageError

    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory, not a file")
    parent = path.parent if str(path.parent) else Path(".")
    existing = parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is a file, not a directory")
    import os

    target = path if path.exists() else existing
    if not os.access(target, os.W_OK):
        raise UsageError(f"{flag} {path}: not writable ({target})")


def writable_dir(path: Path, flag: str) -> None:
    """Exit 2 before any work when the output directory `path` cannot be created or written."""
    import os

    from evalkit.errors import UsageError

    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path}: is a file, not a directory")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: not writable ({existing})")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps descriptions and epilogs as written (exit codes, a rules example) and marks required options."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        text = super()._format_action_invocation(action)
        return f"{text} (required)" if action.required and action.option_strings else text

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        shown = (
            d is not None
            and not isinstance(d, bool)
            and d != []
            and d is not argparse.SUPPRESS
            and bool(action.option_strings)
        )
        if shown and "default" not in text and "%(default)" not in text:
            text += " (default %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """evalkit's argument parser: help as written, required options marked, a bad flag one line and exit 2."""

    def __init__(self, *a, **kw) -> None:  # type: ignore[no-untyped-def]
        kw.setdefault("formatter_class", HelpFormatter)
        super().__init__(*a, **kw)

    def error(self, message: str) -> NoReturn:
        # One line and exit 2, as the contract asks, instead of argparse's usage block.
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(2)
