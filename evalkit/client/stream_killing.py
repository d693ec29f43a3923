"""Does a request that arrives end the stream in progress? llama-cpp-python's server does; `evalkit check` asks it
among its probes and `evalkit stress` before its first cycle (a stream cut that way is then `killed_stream`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from evalkit.client import auxiliary
from evalkit.client.probe import (
    CheckResult,
    Row,
    chat_probe,
    generation_body,
    probe_headers,
    probe_session,
    scrub_row,
)

KILL_TRIES = 5
KILL_ATTEMPTS = 10
KILL_ROW = "a new request kills the stream in progress"


async def stream_killing(
    http: auxiliary.ClientSession,
    result: CheckResult,
    extra_body: dict[str, Any],
    tries: int = KILL_TRIES,
    tokens: int = 64,
    attempts: int = KILL_ATTEMPTS,
) -> Row:
    """Does a request that arrives end the stream in progress (llama-cpp-python's server does)?

    A generation of `tokens` is started and, once its first chunk is read, a second request is sent. A kill is
    seen when the first stream then ends with HTTP 200 and no finish_reason, after the second was sent, while the
    second one finishes; a clean try is one where both finish and the first streamed on for at least half its
    streaming time after the second was sent (so the second had reached the server). One clean try is a no (a
    server that kills streams kills every one); yes needs `tries` kills, so a server that drops connections at
    random (the sim's fault tests drop 15%) is called a killer ~3e-5 of the time. A try that is neither (a slow
    client sent the second late, or something failed) is sent again, up to `attempts` in all. `stress` relabels
    cut streams only on a yes.
    """
    body = generation_body(result, extra_body, tokens)
    seen, notes = 0, []
    for i in range(attempts):
        started = asyncio.Event()
        first = asyncio.ensure_future(chat_probe(http, result.base_url, body, probe_headers(result), started.set))
        waiter = asyncio.ensure_future(started.wait())
        await asyncio.wait([first, waiter], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        t_second = time.perf_counter()
        second = await chat_probe(http, result.base_url, body, probe_headers(result))
        a = await first
        if (
            a.ok
            and second.ok
            and a.t_end is not None
            and a.t_first_chunk is not None
            and a.t_end - t_second >= 0.5 * (a.t_end - a.t_first_chunk)
        ):
            return Row(KILL_ROW, False, f"no: a stream finished while a second request ran (try {i + 1})")
        if a.status == 200 and a.finish_reason is None and a.t_end is not None and a.t_end >= t_second and second.ok:
            seen += 1
            notes.append(f"{a.t_end - t_second:.3f} s after the second request was sent, {a.chunks} chunks in")
            if seen == tries:
                return Row(
                    KILL_ROW,
                    True,
                    f"yes, {seen} of {i + 1} tries: the first stream ended (HTTP 200, no "
                    f"finish_reason) {notes[0]}; stress counts such streams as killed_stream",
                )
    return Row(KILL_ROW, None, f"can't tell: {seen} of {attempts} tries saw a kill, none finished both in time")


async def kill_check(
    base_url: str,
    model: str,
    api_key: str | None,
    extra_body: dict[str, Any],
    uuid_request_ids: bool,
    timeout_s: float = 60.0,
    preflight: CheckResult | None = None,
) -> Row:
    """`stream_killing` alone, for a command that already passed the quick check (stress runs it first)."""
    result = CheckResult(
        base_url=base_url, model=model, uuid_request_ids=uuid_request_ids, secrets=(api_key,) if api_key else ()
    )
    if preflight is not None:  # what the quick check learned: the same fields are left out
        result.fields, result.refused_fields = preflight.fields, list(preflight.refused_fields)
    async with probe_session(api_key, timeout_s) as http:
        return scrub_row(await stream_killing(http, result, extra_body), (api_key,))
