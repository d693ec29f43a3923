"""One stress cycle as lanes, one per request: sent, waiting, the server's prefill window, first token, decode,
cancel, done — in seconds since the cycle's first send, with the server's own windows where its timings or log say
when it started on the request (evalkit.evidence.ttft_split). The PNG timeline and the HTML page both draw these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from evalkit.evidence.request_lines import RequestLineJson
from evalkit.evidence.ttft_split import TtftSplit
from evalkit.report.runs import LabelledRun
from evalkit.runs.schemas import TaggedRequestLine

# A request's part in its scenario, in words (scenario, role).
ROLE_WORDS = {
    ("long_alone", "long"): "long prefill alone",
    ("short_insert", "long"): "long prefill, a short request inserted",
    ("short_insert", "short"): "short request inserted",
    ("double_insert", "long"): "long prefill, two short requests inserted",
    ("double_insert", "short"): "short request inserted (one of two)",
    ("cancel_then_short", "long"): "long request, cancelled",
    ("cancel_then_short", "short"): "next request after the cancel",
    ("concurrent_gen", "gen_pair"): "generation, two at once",
    ("concurrent_gen", "gen_solo"): "generation alone",
    ("short_baseline", "short"): "short request alone",
    ("calibration", "calibration"): "calibration",
}


@dataclass(frozen=True)
class Lane:
    """One request of a cycle; times in seconds since the cycle's first send (None when it did not happen)."""

    request_id: str
    words: str
    sent: float
    first_token: float | None
    done: float | None
    cancelled: bool
    server_start: float | None  # the server began its prefill (timings / log)
    prefill_s: float | None
    launched: float | None  # the server launched it into a slot (log)
    evidence: str
    status: str
    ttft_s: float | None
    completion_tokens: int | None


def role_words(line: TaggedRequestLine) -> str:
    """The request's part in its scenario, in words."""
    key = (str(line.scenario), str(line.role))
    if key in ROLE_WORDS:
        return ROLE_WORDS[key]
    scenario = line.scenario if "scenario" in line.model_fields_set else "request"
    role = line.role if "role" in line.model_fields_set else ""
    return f"{str(scenario).replace('_', ' ')} ({str(role).replace('_', ' ')})"


def cycle_lines(run: LabelledRun, cycle: int | None) -> list[TaggedRequestLine]:
    """The run's requests of one cycle, in send order."""
    return sorted((r for r in run.requests() if r.cycle == cycle), key=lambda r: r.t_sent)


def _splits(run: LabelledRun, cycle: int | None) -> dict[str, TtftSplit]:
    """The server's windows of the cycle's requests (its timings or log), by request id."""
    try:
        from evalkit.evidence.server_evidence import read_evidence
        from evalkit.evidence.ttft_split import split_all

        lines = sorted((r for r in run.raw_requests() if r.get("cycle") == cycle), key=lambda r: r["t_sent"])
        return split_all(cast(list[RequestLineJson], lines), read_evidence(run.run.path))
    except Exception:  # noqa: BLE001  # the server's windows are extra detail: a run without evidence still draws
        return {}


def lanes(run: LabelledRun, cycle: Any) -> list[Lane]:
    """Every request of the cycle as a lane (a request the summary counts is never left out)."""
    lines = cycle_lines(run, cycle)
    if not lines:
        return []
    t0 = lines[0].t_sent
    splits = _splits(run, cycle)
    out = []
    for r in lines:
        sp = splits.get(r.request_id)

        def rel(t: float | None) -> float | None:
            return t - t0 if t is not None else None

        start = rel(sp.server_start if sp is not None else None)
        prefill = sp.prefill_s if sp is not None else None
        if start is None and r.server_timings is not None and r.t_first_token:
            ms = r.server_timings.get("prompt_ms")
            if isinstance(ms, (int, float)):
                prefill = ms / 1000
                start = r.t_first_token - prefill - t0
        out.append(
            Lane(
                request_id=r.request_id,
                words=role_words(r),
                sent=r.t_sent - t0,
                first_token=rel(r.t_first_token),
                done=rel(r.t_done),
                cancelled=r.status == "cancelled",
                server_start=start,
                prefill_s=prefill,
                launched=rel(sp.launched if sp is not None else None),
                evidence=str(sp.evidence if sp is not None else "client"),
                status=str(r.status),
                ttft_s=r.ttft_s,
                completion_tokens=r.completion_tokens,
            )
        )
    return out


def time_scale(run: LabelledRun) -> float:
    """The run's --time-scale (1 in real time)."""
    f = run.record.options_block().get("time_scale")
    return float(f) if isinstance(f, (int, float)) and f > 0 else 1.0


def time_axis_words(run: LabelledRun) -> str:
    """The x-axis label of a stress run's timeline, naming its time base."""
    f = time_scale(run)
    if f == 1:
        return "seconds since the cycle's first request was sent (real time)"
    return f"seconds since the cycle's first request was sent (sim time, {f:g}× faster than real)"
