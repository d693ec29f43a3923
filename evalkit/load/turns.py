"""Sending one chat turn (any list of messages) for the session workloads and writing its line as it completes.

Conversations and shared-prefix groups send more than one user message, so they do not go through the load runner's
one-prompt requests; their lines carry the same fields (`requests.jsonl`: the record, `outcome`, `e2e_s`) plus
the workload's own labels, and `cache_n`: the prompt tokens the server says it served from its prefix cache
(llama.cpp's and the sim's `timings.cache_n`; None when the server does not say).
"""

from __future__ import annotations

import asyncio
import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from evalkit.client.chat import ChatClient, ChatRequest, new_request_id
from evalkit.load.records import LoadLine, TurnLabels, as_json
from evalkit.load.summary_records import HitRateJson
from evalkit.progress import Progress
from evalkit.runs.judge_response import judge
from evalkit.runs.records import RequestRecord
from evalkit.runs.rundir import REQUESTS, RunDir


def reported_cached_tokens(rec: RequestRecord) -> int | None:
    """Prompt tokens the server says came from its prefix cache (`timings.cache_n`), or None."""
    timings = rec.server_timings or {}
    n = timings.get("cache_n")
    return int(n) if isinstance(n, (int, float)) else None


def message_digest(role: str, content: str) -> str:
    """sha256 of a message as the sim digests it (`message_digests` in /sim/events)."""
    return hashlib.sha256(f"{role}\n{content}".encode()).hexdigest()[:16]


class TurnSender:
    """Sends turns on one client and appends each line to `requests.jsonl` off the event loop."""

    def __init__(self, rundir: RunDir, client: ChatClient, timeout_s: float) -> None:
        self.rundir = rundir
        self.client = client
        self.timeout_s = timeout_s
        self.lines: list[LoadLine] = []
        self.progress: Progress | None = None  # counted per turn answered (evalkit.progress)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turn-writer")

    async def send(
        self, messages: list[dict[str, str]], max_tokens: int, expected: str, labels: TurnLabels
    ) -> tuple[LoadLine, RequestRecord]:
        """Send one turn; its line (labels, outcome, `cache_n`) and its record (with the answer's text)."""
        rec = await self.client.chat(
            ChatRequest(
                messages=messages,
                max_tokens=max_tokens,
                temperature=0.0,
                request_id=new_request_id(str(labels.get("workload", "turn"))),
                timeout_s=self.timeout_s,
            )
        )
        verdict = judge(rec, "generation", expected, planned_cancel=False)
        raw = rec.to_json(with_chunk_times=True)
        raw.pop("content", None)
        raw.pop("reasoning", None)
        line = cast(LoadLine, raw)  # the record's fields as requests.jsonl holds them, then the turn's
        cached = reported_cached_tokens(rec)
        as_json(line).update(labels)  # the same dict: the labels first, in their order
        line.update(
            {
                "phase": "measured",
                "messages": len(messages),
                "e2e_s": rec.t_done - rec.t_sent if rec.t_done is not None else None,
                "cache_n": cached,
                "answer_digest": message_digest("assistant", rec.content),
                "outcome": verdict.outcome,
                "error_kind": verdict.error_kind,
                "extracted": verdict.extracted,
            }
        )
        self.lines.append(line)
        self._writer.submit(self.rundir.append, REQUESTS, as_json(line))
        if self.progress is not None:
            self.progress.update(1)
        return line, rec

    async def flush(self) -> None:
        """Wait until every line so far is on disk."""
        await asyncio.get_running_loop().run_in_executor(self._writer, lambda: None)

    def close(self) -> None:
        """Stop the writer once every line is written."""
        self._writer.shutdown(wait=True)


def line_cached_tokens(line: LoadLine) -> int | None:
    """A request line's `cache_n`, or its server timings' (the load runner's lines keep those verbatim)."""
    n: float | None = line.get("cache_n")
    if n is None:
        n = (line.get("server_timings") or {}).get("cache_n")
    return int(n) if isinstance(n, (int, float)) else None


def hit_rate(lines: list[LoadLine]) -> HitRateJson:
    """Prompt tokens served from the cache over prompt tokens, from the server's own `cache_n` per answer."""
    known = [r for r in lines if line_cached_tokens(r) is not None and r.get("prompt_tokens")]
    cached = sum(line_cached_tokens(r) or 0 for r in known)
    prompt = sum(int(r.get("prompt_tokens") or 0) for r in known)
    return {
        "cached_tokens": cached if known else None,
        "prompt_tokens": prompt if known else None,
        "hit_rate": cached / prompt if prompt else None,
        "requests_reporting": len(known),
        "source": "timings.cache_n" if known else None,
    }
