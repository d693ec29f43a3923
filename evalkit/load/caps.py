"""Caps on what a load point has at the server at once: requests in flight, and requests still in prefill.

A rate with a concurrency cap sleeps to each planned time, then waits for a slot (AIPerf's sleep-then-gate): the
schedule keeps its pace and a held request goes as soon as one ends. The prefill cap counts requests sent and still
without a first token, so a burst of long prompts is fed to the server a few at a time. Both slots are taken in
order of arrival (asyncio's semaphores are FIFO for waiters).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from evalkit.clock import Clock


@dataclass
class Ticket:
    """One request's hold on the caps: when it got its slots, and whether it still holds the prefill one."""

    caps: SendCaps
    released_at: float | None  # None: no cap, nothing waited for
    _in_prefill: bool = False
    _in_flight: bool = False

    def first_token(self, _t: float) -> None:
        """The first token arrived: the prefill slot is free."""
        if self._in_prefill and self.caps.prefill is not None:
            self._in_prefill = False
            self.caps.prefill.release()

    def leave(self) -> None:
        """The request ended (answered, failed or cancelled): every slot it still holds is free."""
        self.first_token(0.0)
        if self._in_flight and self.caps.flight is not None:
            self._in_flight = False
            self.caps.flight.release()


@dataclass
class SendCaps:
    """The caps of one point (None: no cap)."""

    max_concurrency: int | None = None
    max_prefill: int | None = None
    flight: asyncio.Semaphore | None = field(init=False, default=None)
    prefill: asyncio.Semaphore | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.max_concurrency:
            self.flight = asyncio.Semaphore(self.max_concurrency)
        if self.max_prefill:
            self.prefill = asyncio.Semaphore(self.max_prefill)

    async def enter(self, clock: Clock) -> Ticket:
        """Wait for a slot under every cap; the ticket says when they were had."""
        if self.flight is None and self.prefill is None:
            return Ticket(self, None)
        t = Ticket(self, None)
        if self.flight is not None:
            await self.flight.acquire()
            t._in_flight = True
        if self.prefill is not None:
            await self.prefill.acquire()
            t._in_prefill = True
        t.released_at = clock.now()
        return t
