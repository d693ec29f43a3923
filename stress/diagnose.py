"""Verdicts on the server's scheduler, each yes / no / can't tell, resting on the per-request TTFT split.

Every verdict names its evidence (`timings`, `log`, `metrics`, `client`), gives the figures it rests on, and for
"can't tell" says what evidence would tell. A verdict is given only when the evidence settles it: on a real GPU
server a client-only reading called an aborting cancel "not aborting" (the next request waited for the server's
prompt-cache store) and a long request "hurt by inserts" (its own prefill was as fast; the wait came before it).
Everything here is a pure function of the run directory's files (requests.jsonl, metrics.jsonl, server_log.jsonl).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from evalkit.evidence.prefix_cache_counters import hit_rate
from evalkit.evidence.request_lines import RequestLineJson
from evalkit.evidence.server_evidence import ServerEvidence
from evalkit.evidence.ttft_split import split_all
from evalkit.evidence.vllm_steps import EVIDENCE as STEPS
from evalkit.evidence.vllm_steps import EVIDENCE_WORDS as STEPS_WORDS
from evalkit.evidence.wait_parts import silent_gaps
from evalkit.runs.rundir import Line
from evalkit_stress.diagnose_facts import Facts
from evalkit_stress.judge_cancel import judge_cancel
from evalkit_stress.judge_concurrency import judge_concurrency
from evalkit_stress.judge_head_of_line import judge_head_of_line
from evalkit_stress.judge_long_hurt import judge_long_hurt
from evalkit_stress.verdicts import CANT, NOT_EXERCISED, Diagnosis

if TYPE_CHECKING:
    from evalkit_stress.metrics import StressMetrics
    from evalkit_stress.verdict_json import DiagnosisJson

__all__ = ["diagnose", "diagnosis_lines", "from_cache"]
WARM_CACHE = 0.5  # the server's counters say its cache served at least half the run's prompt tokens


def from_cache(ev: ServerEvidence) -> str | None:
    """Words saying the server's prefix cache served the run's prompts (its own counters), or None."""
    got = hit_rate([{"ok": True, **s} for s in ev.scrapes])
    if got is None or got["hit_rate"] is None or got["hit_rate"] < WARM_CACHE:
        return None
    return (
        f"the long prompts came from the server's prefix cache ({got['cached_tokens']} of {got['prompt_tokens']} "
        f"prompt tokens by {got['source']}): a warm server, not a short prefill"
    )


def diagnose(metrics: StressMetrics, lines: list[Line], evidence: ServerEvidence | None = None) -> Diagnosis:
    """Every verdict with its evidence and figures, plus the per-request TTFT splits they rest on."""
    ev = evidence or ServerEvidence()
    splits = split_all(cast(list[RequestLineJson], lines), ev)
    facts = Facts(lines, splits)
    facts.from_cache = from_cache(ev)
    conc = judge_concurrency(metrics)
    apart = [r for r in lines if r.get("role") == "gen_pair" and r.get("not_exercised")]
    if conc.verdict == CANT and conc.figures.effective_concurrency is None and apart:
        conc = replace(
            conc,
            verdict=NOT_EXERCISED,
            why=apart[0]["not_exercised"],
            would_tell="two generations sent together that both run (a server that answers both)",
        )
    eff = conc.figures.effective_concurrency
    counts: dict[str, int] = {}
    for s in splits.values():
        counts[s.evidence] = counts.get(s.evidence, 0) + 1
    return Diagnosis(
        effective_concurrency=None if eff is None else max(1, round(eff)),
        effective_concurrency_raw=eff,
        concurrency_speedup=conc.figures.concurrency_speedup,
        concurrency=conc,
        head_of_line_blocking=judge_head_of_line(lines, splits, ev, facts),
        cancel_aborts=judge_cancel(lines, splits, ev, facts),
        long_hurt_by_inserts=judge_long_hurt(lines, splits, facts),
        silent_gaps=silent_gaps(lines, splits, ev),
        split_evidence=counts,
        ttft_split=list(splits.values()),
    )


def _ev(name: Any) -> str:
    return STEPS_WORDS if name == STEPS else str(name)


def _f(x: Any) -> str:
    return "-" if x is None else f"{x:.3g}" if isinstance(x, float) else str(x)


def diagnosis_lines(d: DiagnosisJson, metrics: StressMetrics) -> list[str]:
    """One plain sentence per verdict, for the terminal: the answer, the figures, the evidence."""
    out = []
    conc = d.get("concurrency") or {}
    f = conc.get("figures") or {}
    if d.get("effective_concurrency") is not None:
        out.append(
            f"effective concurrency: {d['effective_concurrency']} ({_f(f.get('effective_concurrency'))} "
            f"streams at once; one stream alone {_f(f.get('gen_alone_tok_s'))} tok/s, each of two together "
            f"{_f(f.get('concurrent_stream_tok_s'))}, combined {_f(f.get('concurrent_combined_tok_s'))}; "
            f"evidence: {conc.get('evidence', 'client')})"
        )
    hol = d["head_of_line_blocking"]
    p95 = (metrics.get("short_insert_ttft_s") or {}).get("p95")
    if conc.get("verdict") == NOT_EXERCISED:
        out.append(f"two generations at once: not exercised ({conc.get('why')}; would tell: {conc.get('would_tell')})")
    if hol["verdict"] in (CANT, NOT_EXERCISED):
        out.append(
            f"head-of-line blocking: {hol['verdict']} ({hol.get('why', '')}; would tell: {hol.get('would_tell')})"
        )
    else:
        cause = f", waiting for {hol['cause']}" if hol.get("cause") and hol["cause"] != CANT else ""
        out.append(
            f"head-of-line blocking: {hol['verdict']} ({hol['blocked']} of {hol['judged']} inserted short "
            f"requests waited out the long prefill{cause}; short-insert TTFT p95 {_f(p95)} s; "
            f"evidence: {_ev(hol['evidence'])})"
        )
    ca = d["cancel_aborts"]
    if ca["verdict"] in (CANT, NOT_EXERCISED):
        out.append(
            f"cancel aborts the prefill: {ca['verdict']} ({ca.get('why', '')}; would tell: {ca.get('would_tell')})"
        )
    else:
        gran = f", {ca['granularity']}" if ca.get("granularity") not in (None, CANT) else ""
        stop = (
            f", engine stopped within {_f(ca['stop_after_cancel_s_max'])} s of the cancel"
            if ca.get("stop_after_cancel_s_max") is not None
            else ""
        )
        nxt = f"; the next request waited for {ca['next_delay_cause']}" if ca.get("next_delay_cause") else ""
        missed = f", {ca['not_exercised_cycles']} not exercised" if ca.get("not_exercised_cycles") else ""
        out.append(
            f"cancel aborts the prefill: {ca['verdict']}{gran}{stop}{nxt} "
            f"({ca['judged_cycles']} cycles{missed}; evidence: {_ev(ca['evidence'])})"
        )
    gaps = d.get("silent_gaps") or []
    if gaps:
        named = sorted({g["cause"] for g in gaps})
        tell = next((g["would_tell"] for g in gaps if g.get("would_tell")), None)
        out.append(
            f"pauses between a launch and its prefill, nothing else running: {len(gaps)}, "
            f"{sum(g['gap_s'] for g in gaps):.3g} s in all (max {max(g['gap_s'] for g in gaps):.3g} s): "
            f"{', '.join(named)}" + (f" (would tell: {tell})" if tell else "")
        )
    hurt = d["long_hurt_by_inserts"]
    if hurt["verdict"] == CANT:
        out.append(
            f"long request hurt by inserts: can't tell (TTFT {_f(hurt['figures'].get('ttft_ratio_p50'))}x "
            f"alone, but {hurt['why']}; would tell: {hurt['would_tell']})"
        )
    else:
        fig = hurt["figures"]
        out.append(
            f"long request hurt by inserts: {hurt['verdict']} (its own prefill {hurt['ratio_p50']:.3f}x alone; "
            f"TTFT {_f(fig.get('ttft_ratio_p50'))}x; evidence: {hurt['evidence']})"
        )
    return out
