"""More streams than one event loop can read: `chat()` handed to K worker processes, each with its own loop and
`ChatClient`, all stamping on the parent's clock; the caller sees the same API and gets the same records back.

Only whole requests cross the process boundary (the request, a cancel, the first-token time, the record): the
chunks are read and stamped in the worker that owns the stream.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import multiprocessing
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.clock import Clock
from evalkit.runs.records import RequestRecord


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to build its client (the API key stays in memory, passed over the pipe)."""

    base_url: str
    model: str
    api_key: str | None
    anchor: tuple[float, float]
    uuid_request_ids: bool
    omit_fields: frozenset[str] = frozenset()
    standing_body: tuple[tuple[str, Any], ...] = ()


def _worker_main(spec: WorkerSpec, conn: Connection) -> None:
    """A worker process: serve chat messages from the pipe until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to answer, in one line (issue #56)
    from evalkit.eventloop import fast_loop

    with fast_loop():
        asyncio.run(_serve(spec, conn))


async def _serve(spec: WorkerSpec, conn: Connection) -> None:
    loop = asyncio.get_running_loop()
    closed = loop.create_future()
    cancels: dict[int, asyncio.Event] = {}
    tasks: set[asyncio.Task[None]] = set()
    client = ChatClient(
        spec.base_url,
        spec.model,
        api_key=spec.api_key,
        clock=Clock.from_anchor(spec.anchor),
        uuid_request_ids=spec.uuid_request_ids,
        omit_fields=spec.omit_fields,
        standing_body=dict(spec.standing_body),
    )

    async def run(key: int, request: ChatRequest, cancel_after_s: float | None, first: bool) -> None:
        on_first = (lambda t: conn.send(("first", key, t))) if first else None
        rec = await client.chat(
            request, cancel_after_s=cancel_after_s, cancel_event=cancels[key], on_first_token=on_first
        )
        cancels.pop(key, None)
        conn.send(("done", key, rec))

    def handle(msg: tuple[Any, ...]) -> None:
        if msg[0] == "chat":
            _, key, request, cancel_after_s, first = msg
            cancels[key] = asyncio.Event()
            task = loop.create_task(run(key, request, cancel_after_s, first))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        elif msg[0] == "cancel":
            if msg[1] in cancels:
                cancels[msg[1]].set()
        elif not closed.done():
            closed.set_result(None)

    threading.Thread(target=_pump, args=(conn, loop, handle), daemon=True).start()
    await closed
    for event in cancels.values():
        event.set()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
    await client.aclose()


def _pump(conn: Connection, loop: asyncio.AbstractEventLoop, handle: Callable[[tuple[Any, ...]], None]) -> None:
    """Blocking reads of whole messages in a thread, each handed to the loop (the pipe stays a blocking socket:
    an event loop's reader would make it non-blocking, and a long prompt arrives in pieces)."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError) as e:
            msg = ("close", None, type(e).__name__)
        try:
            loop.call_soon_threadsafe(handle, msg)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            return
        if msg[0] == "close":
            return


class _Worker:
    """The parent's end of one worker: its pipe, process and requests in flight."""

    def __init__(self, ctx: Any, spec: WorkerSpec) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(spec, child), daemon=True)
        self.proc.start()
        child.close()
        self.pending: dict[int, tuple[asyncio.Future[RequestRecord], Callable[[float], None] | None]] = {}


class MultiProcessChatClient:
    """`ChatClient`'s interface (`chat`, `list_models`, `aclose`) over `procs` worker processes."""

    def __init__(
        self,
        base_url: str,
        model: str,
        procs: int,
        api_key: str | None = None,
        clock: Clock | None = None,
        uuid_request_ids: bool = False,
        omit_fields: frozenset[str] = frozenset(),
        standing_body: dict[str, Any] | None = None,
    ) -> None:
        self.base_url, self.model = base_url, model
        self.clock = clock or Clock()
        self.uuid_request_ids = uuid_request_ids
        self.preflight: Any = None
        self.identity: Any = None
        self._local = ChatClient(
            base_url,
            model,
            api_key=api_key,
            clock=self.clock,
            uuid_request_ids=uuid_request_ids,
            omit_fields=omit_fields,
            standing_body=standing_body,
        )
        self.omit_fields = self._local.omit_fields
        self.standing_body = self._local.standing_body
        spec = WorkerSpec(
            base_url,
            model,
            api_key,
            self.clock.anchor,
            uuid_request_ids,
            frozenset(omit_fields),
            tuple(self.standing_body.items()),
        )
        ctx = multiprocessing.get_context("spawn")  # never fork a process whose event loop is running
        self._workers = [_Worker(ctx, spec) for _ in range(max(1, procs))]
        self._keys = itertools.count()
        self._reading = False

    def wire_id(self, request_id: str) -> str:
        """The id a worker sends (and records) for a caller's id, as `ChatClient.wire_id`."""
        return self._local.wire_id(request_id)

    def _start_reading(self) -> None:
        if self._reading:
            return
        loop = asyncio.get_running_loop()
        for w in self._workers:
            threading.Thread(
                target=_pump, args=(w.conn, loop, functools.partial(self._on_message, w)), daemon=True
            ).start()
        self._reading = True

    def _on_message(self, w: _Worker, msg: tuple[Any, ...]) -> None:
        kind, key, value = msg
        if kind == "close":  # the worker died: its requests end as errors, not hangs
            for fut, _ in w.pending.values():
                if not fut.done():
                    fut.set_exception(RuntimeError(f"client worker process ended ({value})"))
            w.pending.clear()
            return
        entry = w.pending.get(key)
        if entry is None:
            return
        fut, on_first = entry
        if kind == "first" and on_first is not None:
            on_first(value)
        elif kind == "done":
            del w.pending[key]
            if not fut.done():
                fut.set_result(value)

    async def chat(
        self,
        request: ChatRequest,
        *,
        cancel_after_s: float | None = None,
        cancel_event: asyncio.Event | None = None,
        on_first_token: Callable[[float], None] | None = None,
    ) -> RequestRecord:
        """`ChatClient.chat`, run by the worker with the fewest requests in flight."""
        self._start_reading()
        w = min(self._workers, key=lambda x: len(x.pending))
        key = next(self._keys)
        fut: asyncio.Future[RequestRecord] = asyncio.get_running_loop().create_future()
        w.pending[key] = (fut, on_first_token)
        w.conn.send(("chat", key, request, cancel_after_s, on_first_token is not None))
        watcher = asyncio.ensure_future(cancel_event.wait()) if cancel_event is not None else None
        if watcher is not None:
            watcher.add_done_callback(lambda _: None if fut.done() else w.conn.send(("cancel", key, None)))
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            if not fut.done():
                w.conn.send(("cancel", key, None))  # the worker closes the stream and keeps what it saw
            raise
        finally:
            if watcher is not None:
                watcher.cancel()

    async def list_models(self) -> list[str]:
        """Model ids from `GET /v1/models` (asked from this process)."""
        return await self._local.list_models()

    async def aclose(self) -> None:
        """Stop the workers (their streams in flight are cancelled) and close the local pool."""
        for w in self._workers:
            try:
                w.conn.send(("close",))
            except OSError:
                pass
        for w in self._workers:
            await asyncio.get_running_loop().run_in_executor(None, w.proc.join, 10)
            if w.proc.is_alive():
                w.proc.kill()
            w.conn.close()
        await self._local.aclose()

    async def __aenter__(self) -> MultiProcessChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
