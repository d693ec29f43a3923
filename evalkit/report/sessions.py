"""The report's tables of conversation and shared-prefix runs (`evalkit load --conversations` / `--shared-prefix`):
per turn or per cold/warm run, the time to first token and the whole answer, and the prefix-cache hit rate as the
server reported it per answer (`cache_n`, `cached_tokens`) beside the one its own counters give over the run.

One column per run that holds the workload, read from its summary.json alone (`conversation` / `shared_prefix`,
written by evalkit/load/session_summary.py). No change is marked beyond noise here: a few sessions give a handful
of samples a turn, and the figures are there to be read side by side.
"""

from __future__ import annotations

from typing import Any

from evalkit.report.runs import LabelledRun
from evalkit.report.tables import Table


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _s(dist: Any, stat: str) -> str:
    v = _d(dist).get(stat)
    return f"{v:.3f}" if isinstance(v, (int, float)) else "–"


def _rate(block: Any) -> str:
    v = _d(block).get("hit_rate")
    return f"{v:.1%}" if isinstance(v, (int, float)) else "–"


def _latency(row: dict[str, Any]) -> str:
    """ "TTFT p50 / p95, answer p50 (s)" of one turn or run."""
    return f"{_s(row.get('ttft_s'), 'p50')} / {_s(row.get('ttft_s'), 'p95')}, {_s(row.get('e2e_s'), 'p50')}"


def _counts(row: dict[str, Any]) -> str:
    return f"{row.get('requests', '–')} ({row.get('errors', 0)} errors, {row.get('wrong_answers', 0)} wrong)"


def _notes(reading: str, shapes: set[str]) -> list[str]:
    """Under a table: how to read it, then the workload shape(s) of its runs."""
    return [reading, "Shape: " + "; ".join(sorted(shapes)) + "."]


def conversation_table(runs: list[LabelledRun]) -> Table | None:
    """Per turn: latencies and the hit rate by `cache_n`; then the sessions and the run's hit rate both ways."""
    have = [(r, _d(r.summary.get("conversation"))) for r in runs if r.summary.get("conversation")]
    if not have:
        return None
    turns = max(len(c.get("per_turn") or []) for _, c in have)
    rows: list[tuple[str, list[str]]] = []
    for t in range(turns):
        cells_lat, cells_hit = [], []
        for _, c in have:
            per = c.get("per_turn") or []
            row = _d(per[t]) if t < len(per) else {}
            cells_lat.append(_latency(row) if row else "–")
            cells_hit.append(f"{_rate(row.get('prefix_cache'))} of {_counts(row)}" if row else "–")
        rows.append((f"turn {t + 1}: TTFT p50 / p95, answer p50 (s)", cells_lat))
        rows.append((f"turn {t + 1}: hit rate (cache_n) of requests", cells_hit))
    sessions = [_d(c.get("sessions")) for _, c in have]
    rows.append(
        (
            "sessions completed / users",
            [f"{s.get('completed', '–')} / {c.get('users', '–')}" for s, (_, c) in zip(sessions, have)],
        )
    )
    rows.append(
        (
            "session duration p50 / max (s)",
            [f"{_s(s.get('duration_s'), 'p50')} / {_s(s.get('duration_s'), 'max')}" for s in sessions],
        )
    )
    rows.append(("hit rate over the run (cache_n)", [_rate(c.get("prefix_cache")) for _, c in have]))
    rows.append(("hit rate over the run (server metrics)", [_rate(c.get("prefix_cache_metrics")) for _, c in have]))
    notes = _notes(
        "Each turn carries the conversation so far, with the server's own earlier answers; the hit rate is prompt "
        "tokens the server says it served from its cache (`cache_n` / `cached_tokens`) over prompt tokens; the "
        "server-metrics row is the same from its counters over the whole run (– where it exposes none).",
        {f"{c.get('users')} users x {c.get('turns')} turns, think {c.get('think_s')} s" for _, c in have},
    )
    return Table("conversation", "Conversations, per turn", [r.label for r, _ in have], rows, notes, "")


def _reset(rec: dict[str, Any]) -> str:
    """What the run did to the cache first: the reset's method, refused, or none; and whether cold held."""
    if not rec:
        return "–"
    reset = rec.get("reset")
    text = "none" if not isinstance(reset, dict) else str(reset.get("method")) if reset.get("reset") else "refused"
    verified = rec.get("cold_verified")
    return text if verified is None else f"{text}; cold {'held' if verified else 'not held'}"


def shared_prefix_table(runs: list[LabelledRun]) -> Table | None:
    """Per run (cold after a cache reset, then warm): latencies, the hit rate, and the first users' cache_n."""
    have = [(r, _d(r.summary.get("shared_prefix"))) for r in runs if r.summary.get("shared_prefix")]
    if not have:
        return None
    names: list[str] = []
    for _, sp in have:
        for rec in sp.get("runs") or []:
            if _d(rec).get("run") not in names:
                names.append(str(_d(rec).get("run")))
    rows: list[tuple[str, list[str]]] = []
    for name in names:
        recs = [next((_d(x) for x in sp.get("runs") or [] if _d(x).get("run") == name), {}) for _, sp in have]
        rows.append((f"{name}: TTFT p50 / p95, answer p50 (s)", [_latency(x) if x else "–" for x in recs]))
        rows.append(
            (
                f"{name}: hit rate (cache_n) of requests",
                [f"{_rate(x.get('prefix_cache'))} of {_counts(x)}" if x else "–" for x in recs],
            )
        )
        rows.append((f"{name}: cache reset before", [_reset(x) for x in recs]))
        rows.append(
            (
                f"{name}: first user's cache_n per group",
                [", ".join(str(v) for v in x.get("first_users_cache_n") or []) or "–" if x else "–" for x in recs],
            )
        )
    rows.append(("hit rate over the run (server metrics)", [_rate(sp.get("prefix_cache_metrics")) for _, sp in have]))
    notes = _notes(
        "cold: the server's prefix cache reset first where it allows one; warm: the same requests again. A "
        "group's first user pays for its system prompt when the cache is cold, and its `cache_n` shows whether "
        "it did ('cold held': each first user found under half its system prompt cached).",
        {
            f"{sp.get('groups')} groups x {sp.get('users_per_group')} users, "
            f"{sp.get('system_tokens')}-token system prompts"
            for _, sp in have
        },
    )
    return Table("shared-prefix", "Shared-prefix groups, cold and warm", [r.label for r, _ in have], rows, notes, "")


def session_tables(runs: list[LabelledRun]) -> list[Table]:
    """The conversation and shared-prefix tables the runs call for (none for a plain load run)."""
    return [t for t in (conversation_table(runs), shared_prefix_table(runs)) if t is not None]
