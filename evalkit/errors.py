"""Errors that end a command with a one-line reason and a contract exit code."""

from __future__ import annotations


class UsageError(Exception):
    """Bad usage or bad input: the CLI prints the message on one line and exits 2."""

    exit_code = 2
