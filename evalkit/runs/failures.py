"""A run whose requests failed does not pass: more than a set share failed (or all of them) is exit 1, with one line
naming the most common error (issue 33).

A bench that printed no figure because every request got HTTP 422 used to exit 0. Now each server-facing command
counts its measured requests' failures at the end and, past `MAX_FAILED_SHARE`, says so on standard error in one
line and exits 1. The error text came from the server: it is scrubbed of secrets before it is printed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from evalkit.redact import excerpt, scrub

# A server that fails one request in three (the sim's fault tests) still gives a run worth reading; one that fails
# more than half gives figures made of what little got through.
MAX_FAILED_SHARE = 0.5


@dataclass(frozen=True)
class FailureCount:
    """How many measured requests there were, how many failed, and the most common error with its count."""

    total: int
    failed: int
    top_error: str | None
    top_count: int

    @property
    def share(self) -> float:
        """Failed over total (0 when nothing was sent)."""
        return self.failed / self.total if self.total else 0.0


def _key(error: str | None) -> str:
    # Errors differ in their request ids and times; their first 160 characters name the cause.
    return excerpt(error or "unknown error", 160)


def count_failures(errors: Iterable[str | None], total: int) -> FailureCount:
    """`errors`: the error text of each failed request (None when it had none)."""
    keys = Counter(_key(e) for e in errors)
    failed = sum(keys.values())
    top = keys.most_common(1)
    return FailureCount(total, failed, top[0][0] if top else None, top[0][1] if top else 0)


def failure_line(
    command: str, count: FailureCount, secrets: Iterable[str | None] = (), max_share: float = MAX_FAILED_SHARE
) -> str | None:
    """The one line to print (and exit 1 on) when too many requests failed, else None."""
    if count.total == 0 or count.failed == 0 or (count.failed < count.total and count.share <= max_share):
        return None
    what = (
        f"every request failed ({count.failed} of {count.total})"
        if count.failed == count.total
        else f"{count.failed} of {count.total} requests failed (more than {max_share:.0%})"
    )
    return scrub(f"{command}: {what}; most common error ({count.top_count}x): {count.top_error}", secrets)
