"""`evalkit sim` (not yet built)."""

from __future__ import annotations

import argparse

from evalkit.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit sim`."""


def run(args: argparse.Namespace) -> int:
    """Run `evalkit sim`."""
    raise UsageError("evalkit sim is not built yet")
