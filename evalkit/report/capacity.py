"""Load runs in a report: the largest load meeting the targets per run with a before/after verdict, and each
run's capacity table (load point -> latency percentiles, goodput, errors, wrong answers, client honesty).

The maximum moved when it differs from the first run's by more than one search step (one stream; for rates the
search's relative resolution): a search cannot place a maximum more finely than that. At each load point both
runs measured, TTFT p99 is compared with a bootstrap over the requests' TTFTs (noise.py).
"""

from __future__ import annotations

from typing import Any

from evalkit.report import noise, sessions
from evalkit.report.context import SectionContext, SectionVerdict
from evalkit.report.formatting import num
from evalkit.report.runs import LabelledRun
from evalkit.report.tables import Table

UNIT = {"concurrency": "streams", "rate": "requests/s"}


def _f(v: Any, digits: int = 3) -> str:
    # Significant digits, never in exponent form (a goodput of 2011.4 is "2011", not "2.01e+03").
    return "–" if v is None else (num(v, digits, trim=True) if isinstance(v, float) else str(v))


def _step(run: LabelledRun, best: float) -> float:
    if run.summary.get("mode") == "concurrency":
        return 1.0
    return float((run.run.manifest.get("load") or {}).get("resolution") or 0.1) * best


def max_verdict(before: LabelledRun, after: LabelledRun) -> tuple[str, str]:
    """(mark, sentence) for the move of the largest load meeting the targets from `before` to `after`."""
    b, a = before.summary, after.summary
    mode = b.get("mode")
    if a.get("mode") != mode:
        return noise.UNKNOWN, f"{after.label} searched {a.get('mode')}, {before.label} {mode}: not comparable"
    if [t["slo"] for t in a.get("slo") or []] != [t["slo"] for t in b.get("slo") or []]:
        return noise.UNKNOWN, "the runs were held to different targets: not comparable"
    bb, ab = b.get("max_load_meeting_slo"), a.get("max_load_meeting_slo")
    if bb is None or ab is None:
        return noise.UNKNOWN, f"{before.label if bb is None else after.label} has no maximum (a run without --slo)"
    invalid = [r.label for r in (before, after) if (r.summary.get("client") or {}).get("invalid_points")]
    step = max(_step(before, bb), _step(after, ab))
    unit = UNIT.get(str(mode), "")
    moved = f"{num(bb, 6, True)} -> {num(ab, 6, True)} {unit} ({'+' if ab >= bb else ''}{num(ab - bb, 6, True)})"
    if abs(ab - bb) <= step:
        mark, what = noise.WITHIN, f"{moved}: within one search step ({num(step, trim=True)})"
    else:
        higher = ab > bb
        # Only the lower maximum being unbounded spoils the verdict: its true maximum may lie above the other.
        unbounded = (higher and not b.get("bounded")) or (not higher and not a.get("bounded"))
        mark = noise.UNKNOWN if unbounded else (noise.BETTER if higher else noise.WORSE)
        what = f"{moved}: {'more' if higher else 'less'} load meets every target, beyond one search step"
        if unbounded:
            what += ", but the lower run never found a failing load (raise --search-max)"
    evidence = "client-timed latencies of every load point"
    if invalid:
        evidence += f"; points where the client fell behind in {', '.join(invalid)} count as failing"
    return mark, f"{what} (evidence: {evidence})"


def _ttft_samples(run: LabelledRun, load: float) -> list[float]:
    return [
        r.ttft_s
        for r in run.requests()
        if r.phase == "measured" and r.load == load and r.outcome == "correct" and r.ttft_s is not None
    ]


def headline_table(runs: list[LabelledRun]) -> Table:
    """The found maximum per run, its goodput, and the verdict of each run against the first."""
    cols = [r.label for r in runs]
    mode = runs[0].summary.get("mode")
    best: list[str] = []
    for i, r in enumerate(runs):
        cell = _f(r.summary.get("max_load_meeting_slo"), 6)
        if r.summary.get("max_load_meeting_slo") is not None and not r.summary.get("bounded"):
            cell += " (not bounded)"
        if i:
            mark, _ = max_verdict(runs[0], r)
            cell += f" {mark}"
        best.append(cell)
    rows = [
        (f"largest {mode} meeting targets", best),
        ("first failing load", [_f(r.summary.get("first_failing_load"), 6) for r in runs]),
        ("goodput at the maximum (req/s)", [_f(r.summary.get("goodput_rps_at_max")) for r in runs]),
        ("measured requests", [_f(r.summary.get("requests")) for r in runs]),
        ("errors", [_f(r.summary.get("errors")) for r in runs]),
        ("wrong answers", [_f(r.summary.get("wrong_answers")) for r in runs]),
        (
            "invalid points (client behind)",
            [_f(len((r.summary.get("client") or {}).get("invalid_points") or [])) for r in runs],
        ),
    ]
    targets = ", ".join(t["slo"] for t in runs[0].summary.get("slo") or []) or "none"
    notes = [f"Targets: {targets}. " + " ".join(f"{r.label}: {max_verdict(runs[0], r)[1]}." for r in runs[1:])]
    notes.append(
        f"{noise.BETTER} more load meets the targets, {noise.WORSE} less, {noise.WITHIN} within one search "
        f"step, {noise.UNKNOWN} cannot tell."
    )
    return Table("load", "Capacity: the largest load meeting every target", cols, rows, notes, row_header="")


def point_table(run: LabelledRun, base: LabelledRun | None) -> Table:
    """One run's load points as rows; TTFT p99 marked against the first run at the same load."""
    s = run.summary
    rate = s.get("mode") == "rate"
    reasoned = any((p["metrics"].get("reasoning_tokens") or {}).get("max") for p in s.get("points") or [])
    cols = [
        "ttft p50 s",
        "ttft p99 s",
        *(["answer ttft p50/p99 s"] if reasoned else []),
        "itl p99 ms",
        "e2e p99 s",
        "goodput/s",
        "errors",
        "wrong",
        *(["achieved/s"] if rate else ["in flight"]),
        "lateness p95 ms",
        "meets",
        "valid",
    ]
    base_loads = {p["load"] for p in (base.summary.get("points") or [])} if base is not None else set()
    rows = []
    for p in s.get("points") or []:
        m = p["metrics"]
        ttft99 = _f(m["ttft_s"]["p99"])
        if base is not None and p["load"] in base_loads:
            v = noise.samples_verdict(_ttft_samples(base, p["load"]), _ttft_samples(run, p["load"]), False)
            ttft99 += f" {v.mark}"
        late = m["send_lateness_s"]["p95"]
        rows.append(
            (
                p["label"],
                [
                    _f(m["ttft_s"]["p50"]),
                    ttft99,
                    *([f"{_f(m['ttft_answer_s']['p50'])}/{_f(m['ttft_answer_s']['p99'])}"] if reasoned else []),
                    _f(m["itl_ms"]["p99"]),
                    _f(m["e2e_s"]["p99"]),
                    _f(m["goodput_rps"]),
                    _f(m["errors"]),
                    _f(m["wrong_answers"]),
                    _f(m.get("achieved_rate") if rate else m.get("achieved_concurrency")),
                    _f(None if late is None else late * 1000),
                    "yes" if p["meets_slo"] else "no",
                    "yes"
                    if p["valid"]
                    else "no: " + "; ".join(sorted({x for r in p["per_repeat"] for x in r["invalid_reasons"]})),
                ],
            )
        )
    notes = [
        f"{p['label']}: {p['repeats']} repeats, judged on each target's median over them"
        for p in s.get("points") or []
        if p["repeats"] > 1
    ][:1]
    if base is not None:
        notes.append(f"TTFT p99 marks: bootstrap of the median TTFT against {base.label} at the same load.")
    return Table(f"load:{run.label}", f"Load points: {run.label}", cols, rows, notes, row_header="load")


def hosts_table(run: LabelledRun) -> Table | None:
    """A run sent from several hosts (`load --ray`): each host's share, lag and clock figures; None otherwise."""
    client = run.summary.get("client") or {}
    hosts = client.get("hosts") or []
    if not hosts:
        return None
    cols = [
        "node",
        "requests",
        "lateness p95 ms",
        "read lag p99 ms",
        "error budget ms",
        "clock offset ms",
        "± ms",
        "RTT ms",
    ]

    def ms(v: Any) -> str:
        return _f(None if v is None else v * 1000)

    rows = [
        (
            f"host {h['client_host']}",
            [
                f"{h.get('hostname')} ({h.get('node_ip')})",
                _f(h["requests"]),
                ms((h.get("send_lateness_s") or {}).get("p95")),
                ms(h.get("read_lag_p99_s")),
                ms(h.get("error_budget_s")),
                ", ".join(ms(o) for o in h.get("clock_offset_s") or []),
                ms(h.get("clock_uncertainty_s")) + ("" if h.get("clock_consistent", True) else " (clock moved)"),
                ms(h.get("round_trip_s")),
            ],
        )
        for h in hosts
    ]
    notes = [
        "TTFT, inter-token gaps and e2e are differences of one host's own stamps: the clock offset cannot move them. "
        f"Absolute stamps of the merged timeline are off by at most ± the clock's uncertainty; timeline error budget "
        f"{ms(client.get('timeline_error_budget_s'))} ms (the error budget plus the largest uncertainty)."
    ]
    return Table(f"load-hosts:{run.label}", f"Client hosts: {run.label}", cols, rows, notes, row_header="host")


def capacity_tables(runs: list[LabelledRun]) -> list[Table]:
    """The headline table, then one table of load points per run (and of its client hosts, when it had several)."""
    tables = [headline_table(runs)]
    for i, r in enumerate(runs):
        tables.append(point_table(r, runs[0] if i else None))
        hosts = hosts_table(r)
        if hosts is not None:
            tables.append(hosts)
    return tables


def capacity_section(runs: list[LabelledRun], heading: str) -> SectionContext:
    """The report section of load runs: the verdict of each run against the first, and the tables."""
    pointed = [r for r in runs if r.summary.get("points")]  # conversation and shared-prefix runs have none
    verdicts: list[SectionVerdict] = []
    for r in pointed[1:]:
        mark, sentence = max_verdict(pointed[0], r)
        verdicts.append({"label": f"{r.label} vs {pointed[0].label}:", "mark": mark, "sentence": sentence})
    tables = (capacity_tables(pointed) if pointed else []) + sessions.session_tables(runs)
    return {"kind": "load", "heading": heading, "tables": tables, "verdicts": verdicts}
