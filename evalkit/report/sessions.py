"""The report's tables of conversation and shared-prefix runs (`evalkit load --conversations` / `--shared-prefix`):
per turn or per cold/warm run, the time to first token and the whole answer, and the prefix-cache hit rate as the
server reported it per answer (`cache_n`, `cached_tokens`) beside the one its own counters give over the run.

One column per run that holds the workload, read from its summary.json alone (`conversation` / `shared_prefix`,
written by evalkit/load/session_summary.py). No change is marked beyond noise here: a few sessions give a handful
of samples a turn, and the figures are there to be read side by side.
"""

from __future__ import annotations

from evalkit.report.runs import LabelledRun
from evalkit.report.tables import Table
from evalkit.runs.load_parts import CacheReset, Conversation, HitRate, RequestGroup, SharedPrefix, SharedPrefixRun
from evalkit.runs.summary_parts import Distribution


def _s(dist: Distribution | None, stat: str) -> str:
    v = dist.statistic(stat) if dist is not None else None
    return f"{v:.3f}" if v is not None else "–"


def _rate(block: HitRate | None) -> str:
    v = block.hit_rate if block is not None else None
    return f"{v:.1%}" if v is not None else "–"


def _latency(row: RequestGroup) -> str:
    """ "TTFT p50 / p95, answer p50 (s)" of one turn or run."""
    return f"{_s(row.ttft_s, 'p50')} / {_s(row.ttft_s, 'p95')}, {_s(row.e2e_s, 'p50')}"


def _counts(row: RequestGroup) -> str:
    return f"{'–' if row.requests is None else row.requests} ({row.errors} errors, {row.wrong_answers} wrong)"


def _notes(reading: str, shapes: set[str]) -> list[str]:
    """Under a table: how to read it, then the workload shape(s) of its runs."""
    return [reading, "Shape: " + "; ".join(sorted(shapes)) + "."]


def _conversation(run: LabelledRun) -> Conversation | None:
    rec = run.load()
    return rec.conversation if rec is not None else None


def _shared_prefix(run: LabelledRun) -> SharedPrefix | None:
    rec = run.load()
    return rec.shared_prefix if rec is not None else None


def conversation_table(runs: list[LabelledRun]) -> Table | None:
    """Per turn: latencies and the hit rate by `cache_n`; then the sessions and the run's hit rate both ways."""
    have = [(r, c) for r in runs if (c := _conversation(r)) is not None]
    if not have:
        return None
    turns = max(len(c.per_turn) for _, c in have)
    rows: list[tuple[str, list[str]]] = []
    for t in range(turns):
        cells_lat, cells_hit = [], []
        for _, c in have:
            row = c.per_turn[t] if t < len(c.per_turn) else None
            cells_lat.append(_latency(row) if row is not None else "–")
            cells_hit.append(f"{_rate(row.prefix_cache)} of {_counts(row)}" if row is not None else "–")
        rows.append((f"turn {t + 1}: TTFT p50 / p95, answer p50 (s)", cells_lat))
        rows.append((f"turn {t + 1}: hit rate (cache_n) of requests", cells_hit))
    rows.append(
        (
            "sessions completed / users",
            [
                f"{c.sessions.completed if c.sessions and c.sessions.completed is not None else '–'} / "
                f"{'–' if c.users is None else c.users}"
                for _, c in have
            ],
        )
    )
    rows.append(
        (
            "session duration p50 / max (s)",
            [
                f"{_s(c.sessions.duration_s if c.sessions else None, 'p50')} / "
                f"{_s(c.sessions.duration_s if c.sessions else None, 'max')}"
                for _, c in have
            ],
        )
    )
    rows.append(("hit rate over the run (cache_n)", [_rate(c.prefix_cache) for _, c in have]))
    rows.append(("hit rate over the run (server metrics)", [_rate(c.prefix_cache_metrics) for _, c in have]))
    notes = _notes(
        "Each turn carries the conversation so far, with the server's own earlier answers; the hit rate is prompt "
        "tokens the server says it served from its cache (`cache_n` / `cached_tokens`) over prompt tokens; the "
        "server-metrics row is the same from its counters over the whole run (– where it exposes none).",
        {f"{c.users} users x {c.turns} turns, think {c.think_s} s" for _, c in have},
    )
    return Table("conversation", "Conversations, per turn", [r.label for r, _ in have], rows, notes, "")


def _reset(rec: SharedPrefixRun | None) -> str:
    """What the run did to the cache first: the reset's method, refused, or none; and whether cold held."""
    if rec is None:
        return "–"
    reset: CacheReset | None = rec.reset
    text = "none" if reset is None else str(reset.method) if reset.reset else "refused"
    verified = rec.cold_verified
    return text if verified is None else f"{text}; cold {'held' if verified else 'not held'}"


def shared_prefix_table(runs: list[LabelledRun]) -> Table | None:
    """Per run (cold after a cache reset, then warm): latencies, the hit rate, and the first users' cache_n."""
    have = [(r, sp) for r in runs if (sp := _shared_prefix(r)) is not None]
    if not have:
        return None
    names: list[str | None] = []
    for _, sp in have:
        for rec in sp.runs:
            if rec.run not in names:
                names.append(rec.run)
    rows: list[tuple[str, list[str]]] = []
    for name in names:
        recs = [next((x for x in sp.runs if x.run == name), None) for _, sp in have]
        rows.append((f"{name}: TTFT p50 / p95, answer p50 (s)", [_latency(x) if x else "–" for x in recs]))
        rows.append(
            (
                f"{name}: hit rate (cache_n) of requests",
                [f"{_rate(x.prefix_cache)} of {_counts(x)}" if x else "–" for x in recs],
            )
        )
        rows.append((f"{name}: cache reset before", [_reset(x) for x in recs]))
        rows.append(
            (
                f"{name}: first user's cache_n per group",
                [", ".join(str(v) for v in x.first_users_cache_n) or "–" if x else "–" for x in recs],
            )
        )
    rows.append(("hit rate over the run (server metrics)", [_rate(sp.prefix_cache_metrics) for _, sp in have]))
    notes = _notes(
        "cold: the server's prefix cache reset first where it allows one; warm: the same requests again. A "
        "group's first user pays for its system prompt when the cache is cold, and its `cache_n` shows whether "
        "it did ('cold held': each first user found under half its system prompt cached).",
        {f"{sp.groups} groups x {sp.users_per_group} users, {sp.system_tokens}-token system prompts" for _, sp in have},
    )
    return Table("shared-prefix", "Shared-prefix groups, cold and warm", [r.label for r, _ in have], rows, notes, "")


def session_tables(runs: list[LabelledRun]) -> list[Table]:
    """The conversation and shared-prefix tables the runs call for (none for a plain load run)."""
    return [t for t in (conversation_table(runs), shared_prefix_table(runs)) if t is not None]
