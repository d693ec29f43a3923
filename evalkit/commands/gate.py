"""`evalkit gate` (not yet built)."""

from __future__ import annotations

import argparse

from evalkit.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit gate`."""


def run(args: argparse.Namespace) -> int:
    """Run `evalkit gate`."""
    raise UsageError("evalkit gate is not built yet")
