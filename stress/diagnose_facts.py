"""What the scheduler verdicts share: the run's reference figures (the long prefill alone, a short alone,
housekeeping), the requests a verdict reads, and how samples vote."""

from __future__ import annotations

from evalkit.evidence.ttft_split import TtftSplit
from evalkit.evidence.vllm_steps import EVIDENCE as STEPS
from evalkit.runs.rundir import Line
from evalkit.stats import median
from evalkit_stress.verdicts import CANT, NO, NOT_EXERCISED, YES

LONGER_PROMPT = (
    "a longer long prompt (--long-tokens) whose prefill outlasts the planned times, or the server's "
    "log (--server-log) if it shows scheduling"
)
FRESH_PROMPTS = (
    "long prompts the server has not seen (stress salts them per run unless --reuse-prompts), or its prefix cache reset"
)

# A decode rate read from fewer tokens than this is a clock's noise, not a speed: the built-in cycle's shorts answer
# in 1-4 tokens, and a one-token reply's "decode time" (llama.cpp's predicted_ms) is a few microseconds of nothing.
# CI read the after build's next request as 1.49x slower than alone from such replies (#41): its cancel verdict
# came out "can't tell" or "yes" by chance.
DECODE_TIMED_TOKENS = 8


def decode_timed(r: Line) -> bool:
    """Whether a reply decoded enough tokens for its decode rate to say how fast the engine ran."""
    t = r.get("server_timings") or {}
    n = t.get("predicted_n") if isinstance(t, dict) else None
    return max(n or 0, r.get("completion_tokens") or 0) >= DECODE_TIMED_TOKENS


def ok_lines(lines: list[Line], scenario: str, role: str) -> list[Line]:
    """The run's answered requests (with a time to first token) of one scenario and role."""
    return [
        r
        for r in lines
        if r.get("scenario") == scenario
        and r.get("role") == role
        and r.get("status") == "ok"
        and r.get("ttft_s") is not None
    ]


def server_side(s: TtftSplit | None) -> bool:
    """Whether a request's TTFT split rests on the server's own evidence, not the client's clock alone."""
    return s is not None and s.evidence != "client"


def best_evidence(evidences: list[str]) -> str:
    """The most telling of the samples' evidences (vLLM's steps first, the client's clock last)."""
    for e in (STEPS, "timings+log", "log", "timings", "metrics", "client"):
        if e in evidences:
            return e
    return "client"


def vote(verdicts: list[str]) -> str:
    """Yes or no when every settled sample agrees (or a majority, for head-of-line), else can't tell."""
    settled = [v for v in verdicts if v not in (CANT, NOT_EXERCISED)]
    if not settled:
        return NOT_EXERCISED if verdicts and all(v == NOT_EXERCISED for v in verdicts) else CANT
    yes, no = settled.count(YES), settled.count(NO)
    return YES if yes >= no else NO


class Facts:
    """Per-run reference figures the verdicts share: the long prefill alone, a short alone, housekeeping."""

    def __init__(self, lines: list[Line], splits: dict[str, TtftSplit]) -> None:
        alone = ok_lines(lines, "long_alone", "long")
        server = [splits[r["request_id"]] for r in alone if server_side(splits.get(r["request_id"]))]
        self.prefill_alone_server = median([s.prefill_s for s in server])
        self.prefill_alone_client = median([r["ttft_s"] for r in alone])
        rates = [s.prompt_n / s.prefill_s for s in server if s.prompt_n and s.prefill_s]
        self.prefill_tok_s = median(rates)
        shorts = ok_lines(lines, "short_baseline", "short")
        self.short_ttft = median([r["ttft_s"] for r in shorts])
        timed = [r for r in shorts if decode_timed(r)]
        self.short_decode_server = median([splits[r["request_id"]].decode_s_per_token for r in timed])
        self.short_decode_client = median([1 / r["decode_tok_s"] for r in timed if r.get("decode_tok_s")])
        # The long request sent right after the long one alone finished: its wait is the housekeeping after a long.
        after = [splits[r["request_id"]] for r in ok_lines(lines, "short_insert", "long")]
        self.wait_after_long = median([s.before_start_s for s in after if server_side(s)])

        self.from_cache: str | None = None  # set by diagnose: the server's cache served the long prompts

    @property
    def prefill_alone(self) -> float | None:
        return self.prefill_alone_server or self.prefill_alone_client
