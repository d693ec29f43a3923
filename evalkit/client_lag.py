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

from statistics import median
from typing import Any, Iterable

from evalkit.stats import distribution


def client_lag(lines: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`read_lag_s` (distribution), `token_gap_p50_s`, `client_bound` and a one-line `note` (None when fine), from
    `requests.jsonl` lines; `client_bound` is None without receive stamps (https, or not Linux)."""
    lines = list(lines)
    lags = [ln["read_lag_s"] for ln in lines if isinstance(ln.get("read_lag_s"), (int, float))]
    gaps = [1.0 / ln["decode_tok_s"] for ln in lines if isinstance(ln.get("decode_tok_s"), (int, float))
            and ln["decode_tok_s"] > 0]
    gap = median(gaps) if gaps else None
    if not lags:
        return {"read_lag_s": None, "token_gap_p50_s": gap, "client_bound": None, "note": None}
    dist = distribution(lags)
    p95 = dist["p95"] or 0.0
    bound = gap is not None and p95 > gap
    note = None
    if bound:
        note = (f"the client read answers {p95 * 1000:.1f} ms late (p95), longer than the server's "
                f"{gap * 1000:.1f} ms between tokens: the client, not the server, was the bottleneck (tokens that "
                "waited unread share one arrival stamp, what the client did on a token ran late; try "
                "--client-procs 2 or fewer streams)")
    return {"read_lag_s": dist, "token_gap_p50_s": gap, "client_bound": bound, "note": note}
