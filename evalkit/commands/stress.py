"""`evalkit stress` (not yet built)."""

from __future__ import annotations

import argparse

from evalkit.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit stress`."""


def run(args: argparse.Namespace) -> int:
    """Run `evalkit stress`."""
    raise UsageError("evalkit stress is not built yet")
