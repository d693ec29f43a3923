"""`evalkit report` (not yet built)."""

from __future__ import annotations

import argparse

from evalkit.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit report`."""


def run(args: argparse.Namespace) -> int:
    """Run `evalkit report`."""
    raise UsageError("evalkit report is not built yet")
