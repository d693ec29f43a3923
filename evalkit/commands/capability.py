"""`evalkit capability` (not yet built)."""

from __future__ import annotations

import argparse

from evalkit.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit capability`."""


def run(args: argparse.Namespace) -> int:
    """Run `evalkit capability`."""
    raise UsageError("evalkit capability is not built yet")
