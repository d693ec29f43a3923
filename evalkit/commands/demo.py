"""`evalkit demo` (not yet built)."""

from __future__ import annotations

import argparse

from evalkit.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit demo`."""


def run(args: argparse.Namespace) -> int:
    """Run `evalkit demo`."""
    raise UsageError("evalkit demo is not built yet")
