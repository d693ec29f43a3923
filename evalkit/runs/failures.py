"""A run with a request or question left failed does not pass: exit 1, with one line giving the count and the most
common error (issues 33 and 39).

A bench that printed no figure because every request got HTTP 422 used to exit 0, and so did a capability run with
half its requests failed ("acc 50%"). Now each server-facing command counts what is left failed at the end (a
failure a resume retried with success no longer counts) and, for any, says so on standard error in one line and
exits 1; the run is marked incomplete, so starting it again retries what failed. The error text came from the
server: it is scrubbed of secrets before it is printed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from evalkit.redact import excerpt, scrub


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


# What a failure with no error text of its own was (evalkit.runs.judge_response.error_kind): said, not "unknown error".
KIND_WORDS = {
    "empty": "an empty answer (HTTP 200 and a finish_reason, but no text)",
    "killed_stream": "a stream ended without a finish_reason",
    "broken_stream": "a broken stream",
    "timeout": "timeout",
    "cancelled": "cancelled",
    "http": "an HTTP error",
}


def error_words(error: str | None, kind: str | None) -> str | None:
    """A failed request's error text, or the words for its kind when it has none."""
    return error or (KIND_WORDS.get(kind, kind) if kind else None)


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
    command: str,
    count: FailureCount,
    secrets: Iterable[str | None] = (),
    what: str = "requests",
    then: str = "run the same command again to retry them",
) -> str | None:
    """The one line to print (and exit 1 on) when anything is left failed, else None; `then`: the way on."""
    if count.failed == 0:
        return None
    told = (
        f"every one of the {count.total} {what} failed"
        if count.failed == count.total
        else f"{count.failed} of {count.total} {what} failed"
    )
    return scrub(f"{command}: {told}; most common error ({count.top_count}x): {count.top_error}; {then}", secrets)
