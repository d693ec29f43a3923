"""The long-request verdict: is the long request's own prefill slower with inserted shorts than alone."""

from __future__ import annotations

from evalkit.evidence.ttft_split import TtftSplit
from evalkit.runs.rundir import Line
from evalkit.stats import median
from evalkit_stress.diagnose_facts import Facts, best_evidence, ok_lines, server_side
from evalkit_stress.verdicts import CANT, NO, YES, LongHurtVerdict

HURT_RATIO = 1.10  # a long request's own prefill 10% slower with inserts than alone


# -- long request hurt by inserts ---------------------------------------------------------------------------------
def judge_long_hurt(lines: list[Line], splits: dict[str, TtftSplit], facts: Facts) -> LongHurtVerdict:
    """Is the long request's own prefill slower with inserted shorts than alone (not its time to first token)?"""
    with_ins = [
        r for s in ("short_insert", "double_insert") for r in ok_lines(lines, s, "long") if not r.get("not_exercised")
    ]
    server = [splits[r["request_id"]] for r in with_ins if server_side(splits.get(r["request_id"]))]
    ttft_ratio = None
    ttft_with = median([r["ttft_s"] for r in with_ins])
    if ttft_with is not None and facts.prefill_alone_client:
        ttft_ratio = ttft_with / facts.prefill_alone_client
    prefill_with = median([s.prefill_s for s in server])
    if prefill_with is None or not facts.prefill_alone_server:
        return LongHurtVerdict(
            CANT,
            None,
            "client",
            None,
            {"ttft_ratio_p50": ttft_ratio},
            why="its time to first token also holds any wait before its prefill started",
            would_tell="the server's timings (prompt_ms) or its prefill-time histogram in /metrics",
        )
    ratio = prefill_with / facts.prefill_alone_server
    verdict = YES if ratio > HURT_RATIO else NO
    return LongHurtVerdict(
        verdict,
        verdict == YES,
        best_evidence([s.evidence for s in server]),
        ratio,
        {
            "prefill_with_inserts_s_p50": prefill_with,
            "prefill_alone_s_p50": facts.prefill_alone_server,
            "ttft_ratio_p50": ttft_ratio,
            "wait_before_prefill_with_inserts_s_p50": median([s.before_start_s for s in server]),
        },
    )
