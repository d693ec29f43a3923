"""Typed parts of a load run's summary that the report reads: a conversation run's turns and sessions
(`conversation`, evalkit/load/conversation.py) and a shared-prefix run's cold and warm runs (`shared_prefix`,
evalkit/load/shared_prefix.py), each with the prefix-cache hit rate the server reported.

As `summary_parts`: every field optional, extra keys kept, numbers as written.
"""

from __future__ import annotations

from evalkit.runs.summary_parts import Distribution, Number, Part


class HitRate(Part):
    """A prefix-cache hit rate: cached prompt tokens over prompt tokens (the answers' own counts, or the server's
    counters over the run)."""

    hit_rate: Number | None = None


class RequestGroup(Part):
    """Requests taken together (one turn, or one cold or warm run): their latencies, hit rate and counts."""

    ttft_s: Distribution | None = None
    e2e_s: Distribution | None = None
    prefix_cache: HitRate | None = None
    requests: int | None = None
    errors: int = 0
    wrong_answers: int = 0


class Sessions(Part):
    """A conversation run's sessions: how many completed, and how long they took."""

    completed: int | None = None
    duration_s: Distribution | None = None


class Conversation(Part):
    """A load summary's `conversation` (`--conversations`): per turn, the sessions, the run's hit rate both ways."""

    users: int | None = None
    turns: int | None = None
    think_s: Number | None = None
    per_turn: list[RequestGroup] = []
    sessions: Sessions | None = None
    prefix_cache: HitRate | None = None
    prefix_cache_metrics: HitRate | None = None


class CacheReset(Part):
    """What a shared-prefix run did to the server's cache before its cold run."""

    reset: bool | None = None
    method: str | None = None


class SharedPrefixRun(RequestGroup):
    """One run of a shared-prefix workload (cold after a cache reset, then warm)."""

    run: str | None = None
    reset: CacheReset | None = None
    cold_verified: bool | None = None
    first_users_cache_n: list[int | None] = []


class SharedPrefix(Part):
    """A load summary's `shared_prefix` (`--shared-prefix`): its groups and each run, and the server's hit rate."""

    groups: int | None = None
    users_per_group: int | None = None
    system_tokens: int | None = None
    runs: list[SharedPrefixRun] = []
    prefix_cache_metrics: HitRate | None = None
