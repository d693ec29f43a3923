"""Errors that end a command with a one-line reason and a contract exit code."""

from __future__ import annotations


class UsageError(Exception):
    """Bad usage or bad input: the CLI prints the message on one line and exits 2."""

    exit_code = 2


class ServerRefused(UsageError):
    """The preflight found that the server refuses evalkit's requests: one line in its own words, exit 1."""

    exit_code = 1
