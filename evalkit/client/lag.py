"""Was the client, not the server, the bottleneck? From `read_lag_s`, how late the client read each answer's bytes
after the kernel received them.

Chunk times are the kernel's receive stamps, so a busy client does not bend them; but what it does on a token
(cancel, send the next request) happens late by its read lag, tokens that queued unread share the stamp of the last
of them (the kernel merges them), and a client that reads more slowly than the server writes makes the server wait on
a full socket. The client was the bottleneck when its read lag (p95) exceeds the
server's median time between tokens: answers waited for the client longer than the server took to make the next
token. `--client-procs K` spreads the reading over K processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import median
from typing import Any, TypedDict

from evalkit.stats import distribution, percentile

AGREE = 0.01  # client and server decode rates within 1% (median): the client kept up, whatever its read lag
# A run whose client error budget (below) exceeds this is marked in the report: its TTFTs may be off by more.
ERROR_BUDGET_LIMIT_S = 0.001


class ErrorBudget(TypedDict):
    """The client's own error budget of a run (`error_budget`), in the order written."""

    read_lag_p99_s: float | None
    first_tokens_maybe_shared_stamp: int | None
    error_budget_s: float | None
    over_error_budget: bool | None


class ClientLag(ErrorBudget):
    """A summary's `client` (`client_lag`): how late the client read answers, and its error budget's keys after."""

    read_lag_s: dict[str, float | int | None] | None  # evalkit.stats.distribution
    token_gap_p50_s: float | None
    decode_vs_server_p50: float | None
    client_bound: bool | None
    note: str | None


def error_budget(lines: list[dict[str, Any]]) -> ErrorBudget:
    """The client's own error budget of a run, from `requests.jsonl` lines: `read_lag_p99_s` (how late it read
    answers after the kernel had them, p99), `first_tokens_maybe_shared_stamp` (first tokens whose read also held
    later bytes, so their stamp may be a later token's) and `error_budget_s` (p99 over requests of
    `first_token_stamp_bound_s`: how far a first token's stamp may lie after its true arrival; 0 when every first
    token was read on its own). All None without receive stamps (https, not Linux)."""
    lags = [ln["read_lag_s"] for ln in lines if isinstance(ln.get("read_lag_s"), (int, float))]
    bounds = [
        ln["first_token_stamp_bound_s"] for ln in lines if isinstance(ln.get("first_token_stamp_bound_s"), (int, float))
    ]
    budget = percentile(bounds, 99) if bounds else None
    return {
        "read_lag_p99_s": percentile(lags, 99) if lags else None,
        "first_tokens_maybe_shared_stamp": sum(1 for b in bounds if b > 0) if bounds else None,
        "error_budget_s": budget,
        "over_error_budget": None if budget is None else budget > ERROR_BUDGET_LIMIT_S,
    }


def _rate_gap(lines: list[dict[str, Any]]) -> float | None:
    """Median |client decode tok/s / server `timings.predicted_per_second` - 1| over requests that have both."""
    diffs = [
        abs(ln["decode_tok_s"] / t["predicted_per_second"] - 1)
        for ln in lines
        if isinstance(t := ln.get("server_timings"), dict)
        and isinstance(t.get("predicted_per_second"), (int, float))
        and t["predicted_per_second"] > 0
        and isinstance(ln.get("decode_tok_s"), (int, float))
        and (t.get("predicted_n") or 0) > 1
    ]
    return median(diffs) if diffs else None


def client_lag(lines: Iterable[dict[str, Any]]) -> ClientLag:
    """`read_lag_s` (distribution), `token_gap_p50_s`, `decode_vs_server_p50` (median |client / server decode rate
    - 1|, llama.cpp timings), `client_bound` and a one-line `note` naming the figure (None when fine), from
    `requests.jsonl` lines; `client_bound` is None without receive stamps (https, or not Linux). The client is never
    called the bottleneck when its decode rates agree with the server's own (within 1%): tokens it read late still
    came at the server's pace. The error budget's keys (`error_budget`) are merged in."""
    lines = list(lines)
    budget = error_budget(lines)
    lags = [ln["read_lag_s"] for ln in lines if isinstance(ln.get("read_lag_s"), (int, float))]
    gaps = [
        1.0 / ln["decode_tok_s"]
        for ln in lines
        if isinstance(ln.get("decode_tok_s"), (int, float)) and ln["decode_tok_s"] > 0
    ]
    gap = median(gaps) if gaps else None
    agree = _rate_gap(lines)
    if not lags:
        return {
            "read_lag_s": None,
            "token_gap_p50_s": gap,
            "decode_vs_server_p50": agree,
            "client_bound": None,
            "note": None,
            **budget,
        }
    dist = distribution(lags)
    p95 = dist["p95"] or 0.0
    bound = gap is not None and p95 > gap and not (agree is not None and agree <= AGREE)
    note = None
    if bound and gap is not None:  # bound implies a gap; the check tells the type checker
        vs = f"; its decode rates differ from the server's timings by {agree:.1%} (median)" if agree is not None else ""
        note = (
            f"the client was the bottleneck: read_lag_s p95 {p95 * 1000:.1f} ms (how late it read answers "
            f"after the kernel got them) exceeds token_gap_p50_s {gap * 1000:.1f} ms (the server's time between "
            f"tokens){vs} (tokens that waited unread share one arrival stamp, what the client did on a token ran "
            "late; try --client-procs 2 or fewer streams)"
        )
    return {
        "read_lag_s": dist,
        "token_gap_p50_s": gap,
        "decode_vs_server_p50": agree,
        "client_bound": bound,
        "note": note,
        **budget,
    }
