"""Which planned situations a stress run actually produced: verdicts and figures only about what happened (issue 33).

A schedule plans situations; the server decides whether they happen. A long request that finishes before its
planned cancel was never cancelled, so the short sent after it is not "the next request after a cancel"; a short
sent after the long prefill ended was not inserted into it; two generations of which one ended before the other was
sent were not served at once. Such requests are "not exercised", with the reason: their timings feed no metric,
their verdicts say so, and the report's rows for them say so instead of showing a figure. A pure function of the
request lines (old runs without `cancel_sent` are read from their status).
"""

from __future__ import annotations

from typing import Any, TypedDict

from evalkit.runs.rundir import Line
from evalkit_stress.metric_registry import exercised_key

NOT_EXERCISED = "not exercised"
CANCEL_NOT_SENT = "the long request ended before its planned cancel, so no cancel was sent"
LONG_FAILED_BEFORE_CANCEL = "the long request failed before its planned cancel"
INSERT_AFTER_PREFILL = "sent after the long prefill had ended (its first token had come)"
INSERT_LONG_FAILED = "the long request it was inserted into failed before its first token"
NO_INSERT_INSIDE = "no short request landed inside its prefill"
PAIR_APART = "the two generations were never in flight together (one ended before the other was sent)"
PAIR_PARTNER_FAILED = "the other generation of the pair failed"

# A not-exercised request is counted (summary's `not_exercised`) under the metric it would have fed
# (stress/metric_registry.py); the long request of a cancel that was never sent, under the cancel itself.
_CANCEL_KEY: dict[tuple[str | None, str | None], str] = {("cancel_then_short", "long"): "cancel"}


def cancel_sent(line: Line) -> bool:
    """Whether a request with a planned cancel was really cancelled (it was still running at the cancel's time)."""
    if "cancel_sent" in line:
        return bool(line["cancel_sent"])
    return line.get("status") == "cancelled"


def _by_cycle(lines: list[Line], scenario: str, role: str) -> dict[Any, list[Line]]:
    out: dict[Any, list[Line]] = {}
    for r in lines:
        if r.get("scenario") == scenario and r.get("role") == role:
            out.setdefault((r.get("cycle"), r.get("round", 1)), []).append(r)
    return out


def not_exercised(lines: list[Line]) -> dict[str, str]:
    """request_id -> why the situation it was planned for did not happen (absent when it did)."""
    out: dict[str, str] = {}
    longs = _by_cycle(lines, "cancel_then_short", "long")
    for key, shorts in _by_cycle(lines, "cancel_then_short", "short").items():
        for c in longs.get(key, []):
            if c.get("interrupted") or c.get("cancel_after_s") is None or cancel_sent(c):
                continue
            why = LONG_FAILED_BEFORE_CANCEL if c.get("status") not in ("ok", "cancelled") else CANCEL_NOT_SENT
            out[c["request_id"]] = why
            for s in shorts:
                out[s["request_id"]] = why
    for scen in ("short_insert", "double_insert"):
        longs = _by_cycle(lines, scen, "long")
        for key, shorts in _by_cycle(lines, scen, "short").items():
            for long in longs.get(key, [])[:1]:
                first = long.get("t_first_token")
                inside = 0
                for s in shorts:
                    if first is None:
                        out[s["request_id"]] = INSERT_LONG_FAILED
                    elif s.get("t_sent") is not None and s["t_sent"] >= first:
                        out[s["request_id"]] = INSERT_AFTER_PREFILL
                    else:
                        inside += 1
                if not inside and first is not None:
                    out[long["request_id"]] = NO_INSERT_INSIDE
    for pair in _by_cycle(lines, "concurrent_gen", "gen_pair").values():
        if len(pair) < 2:
            continue
        if any(r.get("status") != "ok" for r in pair):
            for r in pair:
                if r.get("status") == "ok":
                    out[r["request_id"]] = PAIR_PARTNER_FAILED
            continue
        if max(r["t_sent"] for r in pair) >= min(r.get("t_done") or float("inf") for r in pair):
            for r in pair:
                out[r["request_id"]] = PAIR_APART
    return out


def annotate(lines: list[Line]) -> list[Line]:
    """The lines, each not-exercised one with `not_exercised` set to its reason (copies; the input is left as is)."""
    why = not_exercised(lines)
    return [{**r, "not_exercised": why[r["request_id"]]} if r.get("request_id") in why else r for r in lines]


def exercised(lines: list[Line]) -> list[Line]:
    """The lines whose planned situation happened (what the metrics are computed from)."""
    why = not_exercised(lines)
    return [r for r in lines if r.get("request_id") not in why]


class NotExercisedCount(TypedDict):
    """summary.json's `not_exercised` entry for one metric: requests whose situation did not happen, by reason."""

    count: int
    reasons: dict[str, int]


def summary(lines: list[Line]) -> dict[str, NotExercisedCount]:
    """Per metric: how many requests did not exercise it, and why (summary.json `not_exercised`)."""
    out: dict[str, NotExercisedCount] = {}
    for r in annotate(lines):
        why = r.get("not_exercised")
        if not why:
            continue
        key = (r.get("scenario"), r.get("role"))
        metric = _CANCEL_KEY.get(key) or exercised_key(*key)
        if metric is None:
            continue
        entry = out.setdefault(metric, {"count": 0, "reasons": {}})
        entry["count"] += 1
        entry["reasons"][why] = entry["reasons"].get(why, 0) + 1
    return out
