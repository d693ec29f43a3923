"""`evalkit bench` (not yet built)."""

from __future__ import annotations

import argparse

from evalkit.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit bench`."""


def run(args: argparse.Namespace) -> int:
    """Run `evalkit bench`."""
    raise UsageError("evalkit bench is not built yet")
