"""A lean HTTP/1.1 client for the client's hot path: the send stamped right before the bytes go into the socket, and
the answer handed to a sink as it is read (no task wake-up per chunk), each piece stamped with when it arrived.

Plain-http connections on Linux are read by one `_BatchReader` per pool: an epoll set of the pool's sockets, read
with `recvmsg` so that every piece carries the kernel's receive stamp (`evalkit.client.kernel_stamps`), and polled once
every `BATCH_HOLD_S` while bytes keep coming. A loaded client then does not stamp late (the stamp is the
kernel's, not the loop's) and reads many sockets per wake-up. https, and platforms without receive stamps, use
asyncio's transports and stamp a piece when its callback runs.

Only what evalkit's requests need: one request at a time per connection, keep-alive pooling, `Content-Length`,
chunked and read-until-close bodies, http and https. No proxies, redirects or compression.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import httptools

from evalkit.client import kernel_stamps
from evalkit.clock import Clock

# While bytes keep coming, the batch reader waits this long after a batch before it looks again: reads stay
# stamped by the kernel, so waiting moves no stamp, and a loaded client reads many sockets per wake-up.
BATCH_HOLD_S = 0.001
# Polls in a row that may find nothing before the reader hands its set back to the loop's watch: one for every
# this many sockets in the set. Putting the set back costs uvloop an epoll_ctl ADD of one epoll set into another,
# which the kernel checks against every socket in the inner set (70 us with 512 sockets, seen), and one more sleep
# and wake-up; a poll that finds nothing costs a few us. So a large set stays on the timer through short gaps (512
# sockets: 8 empty polls), a small one goes back at the first (at 1 stream, 8 polls doubled the CPU a chunk).
SOCKETS_PER_IDLE_POLL = 64
_READ_SIZE = 256 * 1024
_TIMESPEC = struct.Struct("qq")


class BodySink(Protocol):
    """Receives one response as it arrives; `now` is when its bytes arrived (the kernel's receive stamp where there
    is one, else when they were read off the socket)."""

    def on_head(self, status: int, headers: dict[str, str], now: float) -> None: ...

    def on_data(self, data: bytes, now: float, late: float = 0.0) -> None:
        """`late`: how long after `now` the bytes were read (the read's own lateness; 0 without receive stamps)."""


class APIConnectionError(Exception):
    """The request could not be sent or the connection failed before a response (the cause is chained)."""


class ClosedBeforeAnswering(APIConnectionError):
    """The server closed the connection after the request went out and before any byte of response."""


class RemoteProtocolError(Exception):
    """The response broke off or was not valid HTTP/1.1."""


@dataclass(frozen=True)
class Origin:
    """Where requests go: scheme, host, port, and the base path (`/v1`) prefixed to every request path."""

    scheme: str
    host: str
    port: int
    base_path: str

    @classmethod
    def parse(cls, base_url: str) -> Origin:
        """An `Origin` from a base URL such as `http://127.0.0.1:8000/v1`."""
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        port = u.port or (443 if u.scheme == "https" else 80)
        return cls(u.scheme, u.hostname, port, u.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def build_request(origin: Origin, method: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
    """The request's bytes: request line, headers (CR/LF refused in values), body."""
    lines = [f"{method} {origin.base_path}{path} HTTP/1.1", f"Host: {origin.host_header}"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value:
            raise ValueError(f"header {name} holds a line break")
        lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _Connection(asyncio.Protocol):
    """One keep-alive connection; its response's framing (status line, headers, `Content-Length` or chunked) is
    parsed by llhttp (`httptools`), and the body is handed to the sink one piece per read, stamped with that read."""

    def __init__(self, clock: Clock, on_reusable: Callable[[_Connection], None]) -> None:
        self._clock = clock
        self._on_reusable = on_reusable
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._sink: BodySink | None = None
        self._done: asyncio.Future[None] | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._mode = "idle"  # idle, head, body, chunked, close (read until the server closes), complete
        self._headers: dict[str, str] = {}
        self._header_name = ""
        self._now = 0.0
        self._body: list[bytes] = []
        self._keep_alive = True
        self._got_bytes = False
        self._extra = False  # bytes after the end of the response: this connection is not reused
        # How late the bytes of the exchange in progress were read after the kernel had them (longest; None where
        # the transport has no receive stamps).
        self.read_lag: float | None = None

    # asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # our own transports are _SocketTransport or asyncio's Transport
        if isinstance(transport, _SocketTransport):
            self.read_lag = 0.0

    def data_received(self, data: bytes) -> None:
        self.received(data, self._clock.now())

    def received(self, data: bytes | memoryview, now: float, late: float = 0.0) -> None:
        """Bytes of the response, which arrived at `now` and were read `late` after (a view is read at once, not
        kept)."""
        if self._done is None or self._done.done() or self._parser is None:
            self._close()  # bytes nobody asked for: this connection cannot be trusted again
            return
        self._got_bytes = True
        self._now = now
        try:
            try:
                self._parser.feed_data(data)
            except httptools.HttpParserError as e:
                raise RemoteProtocolError(f"not valid HTTP/1.1: {e}") from None
            body = self._body
            if body:  # one piece a read: what arrived together is handed over together, with its one stamp
                self._body = []
                self._sink.on_data(body[0] if len(body) == 1 else b"".join(body), now, late)  # type: ignore[union-attr]  # a sink is set before any body arrives
            if self._mode == "complete":
                self._finish()
        except Exception as e:  # noqa: BLE001 - a framing error or the sink's own; either ends this exchange
            self._fail(e)
            self._close()

    # llhttp's callbacks (httptools), called from inside `feed_data`
    def on_message_begin(self) -> None:
        if self._mode == "complete":
            self._extra = True  # a second response to one request

    def on_header(self, name: bytes, value: bytes) -> None:
        if name:
            self._header_name = name.decode("latin-1").strip().lower()
        key, text = self._header_name, value.decode("latin-1").strip()
        headers = self._headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        parser, headers = self._parser, self._headers
        assert parser is not None
        self._headers = {}
        status = parser.get_status_code()
        if 100 <= status < 200 or self._mode != "head":
            return  # an interim response (100 Continue): the real one follows
        headers[":version"] = f"HTTP/{parser.get_http_version()}"
        self._keep_alive = parser.should_keep_alive()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._mode = "chunked"
        elif "content-length" in headers or status in (204, 304):
            self._mode = "body"
        else:
            self._mode, self._keep_alive = "close", False
        self._sink.on_head(status, headers, self._now)  # type: ignore[union-attr]  # set by start()

    def on_body(self, body: bytes) -> None:
        if self._mode != "complete":
            self._body.append(body)

    def on_message_complete(self) -> None:
        if self._mode in ("body", "chunked", "close"):
            self._mode = "complete"

    def eof_received(self) -> bool | None:
        if self._mode == "close" and self._done is not None and not self._done.done():
            self._mode = "idle"
            self._done.set_result(None)
        return None  # let the transport close

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._done is not None and not self._done.done():
            if self._mode == "close":
                self._done.set_result(None)
            elif not self._got_bytes:
                err = ClosedBeforeAnswering("Connection error.")
                err.__cause__ = RemoteProtocolError("Server disconnected without sending a response.")
                self._done.set_exception(err)
            elif self._mode == "chunked":
                self._done.set_exception(
                    RemoteProtocolError(
                        "peer closed connection without sending complete message body (incomplete chunked read)"
                    )
                )
            else:
                self._done.set_exception(
                    RemoteProtocolError("peer closed connection without sending complete message body")
                )

    # one exchange
    def start(self, request: bytes, sink: BodySink) -> tuple[float, asyncio.Future[None]]:
        """Write the request now; returns the send stamp (taken with no await before the write) and the end."""
        assert self.transport is not None
        self._sink, self._mode, self._got_bytes, self._body, self._headers = sink, "head", False, [], {}
        self._parser = httptools.HttpResponseParser(self)
        if self.read_lag is not None:
            self.read_lag = 0.0
        self._done = asyncio.get_running_loop().create_future()
        t_sent = self._clock.now()
        self.transport.write(request)
        return t_sent, self._done

    def close(self) -> None:
        """Close the connection (how a stream is cancelled: the server sees the client leave)."""
        self._close()

    def _close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: BaseException) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(exc)

    def _finish(self) -> None:
        self._mode = "idle"
        self._sink = None
        self._parser = None
        done = self._done
        if self._keep_alive and not self.closed and not self._extra:
            self._on_reusable(self)
        else:
            self._close()
        self._extra = False
        if done is not None and not done.done():
            done.set_result(None)


class _SocketTransport:
    """A plain-TCP connection's socket as its `_Connection`'s transport: written with `send` (the rest of a large
    request when the socket takes it), read by the pool's `_BatchReader` with the kernel's receive stamps."""

    def __init__(self, sock: socket.socket, reader: _BatchReader, protocol: _Connection) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self._reader = reader
        self.protocol = protocol
        self._out = bytearray()
        self._closing = False

    def write(self, data: bytes) -> None:
        """Send now; what the socket does not take goes out as it can (in order)."""
        if self._closing:
            raise ConnectionResetError("the connection is closed")
        if not self._out:
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
            self._reader.loop.add_writer(self.fd, self._flush)
        self._out += data

    def _flush(self) -> None:
        try:
            sent = self.sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self.lost(e)
            return
        del self._out[:sent]
        if not self._out:
            self._reader.loop.remove_writer(self.fd)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Close the socket at once (the server sees the client leave)."""
        if self._closing:
            return
        self._closing = True
        self._reader.remove(self)
        if self._out:
            self._reader.loop.remove_writer(self.fd)
            self._out.clear()
        self.sock.close()

    def ended(self) -> None:
        """The server closed its end (a read returned nothing)."""
        protocol = self.protocol
        protocol.eof_received()
        self.close()
        protocol.connection_lost(None)

    def lost(self, exc: Exception) -> None:
        """The socket failed."""
        self.close()
        self.protocol.connection_lost(exc)


class _BatchReader:
    """Reads a pool's plain-TCP sockets: one epoll set. While nothing comes, the loop watches the set; once bytes
    come, every readable socket is read, and then the set is polled again every `hold_s` for as long as each poll
    finds bytes (the kernel keeps stamping what arrives meanwhile); a poll that finds none hands the set back to the
    loop's watch. A busy set costs one timer per batch, not a reader taken off the loop and put back per batch (each
    of which cost uvloop a poll handle and two to five epoll_ctl calls)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Clock, hold_s: float | None = None) -> None:
        self.loop = loop
        self._clock = clock
        self._hold = BATCH_HOLD_S if hold_s is None else hold_s
        self._epoll = select.epoll()
        self._fd = self._epoll.fileno()
        self._conns: dict[int, _SocketTransport] = {}
        self._view = memoryview(bytearray(_READ_SIZE))
        self._timer: asyncio.TimerHandle | None = None
        self._watching = False
        self._closed = False
        self._empty = 0  # polls in a row that found nothing
        self._watch()

    def add(self, transport: _SocketTransport) -> None:
        self._epoll.register(transport.fd, select.EPOLLIN)
        self._conns[transport.fd] = transport

    def remove(self, transport: _SocketTransport) -> None:
        if self._conns.pop(transport.fd, None) is not None and not self._closed:
            try:
                self._epoll.unregister(transport.fd)
            except (OSError, ValueError):
                pass

    @property
    def empty(self) -> bool:
        return not self._conns

    def _watch(self) -> None:
        if not self._closed and not self._watching:
            self._watching = True
            self.loop.add_reader(self._fd, self._on_ready)

    def _on_ready(self) -> None:
        self.loop.remove_reader(self._fd)
        self._watching = False
        self._tick()

    def _tick(self) -> None:
        """Read what is readable and look again in `hold_s`; with nothing readable, go back to the loop's watch."""
        self._timer = None
        if self._closed:
            return
        events = self._epoll.poll(0)
        if not events:
            self._empty += 1
            if self._empty >= len(self._conns) // SOCKETS_PER_IDLE_POLL:
                self._empty = 0
                self._watch()
            else:
                self._timer = self.loop.call_later(self._hold, self._tick)
            return
        self._empty = 0
        self._read(events)
        if not self._closed:
            self._timer = self.loop.call_later(self._hold, self._tick)

    def _read(self, events: list[tuple[int, int]]) -> None:
        # The hot path of every streamed token, in one frame: read each readable socket with its receive stamp, note
        # how late it was read, hand the bytes over.
        # Stamps are wall-clock time: `offset` puts them on the client's clock, and the read time is taken on the
        # same wall clock (a C call, not a Python frame per read).
        offset = kernel_stamps.clock_offset(self._clock)
        wall = time.time
        view, conns, space = self._view, self._conns, kernel_stamps.ANCILLARY_SPACE
        buffers, stamped, unpack = [view], kernel_stamps.SO_TIMESTAMPNS, _TIMESPEC.unpack_from
        for fd, _ in events:
            transport = conns.get(fd)
            if transport is None:
                continue
            protocol = transport.protocol
            try:
                n, ancdata, _, _ = transport.sock.recvmsg_into(buffers, space)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as e:
                transport.lost(e)
                continue
            if n == 0:
                transport.ended()
                continue
            if ancdata and ancdata[0][1] == stamped:
                sec, nsec = unpack(ancdata[0][2])
                stamp = sec + nsec * 1e-9
                lag = wall() - stamp
                if lag > protocol.read_lag:
                    protocol.read_lag = lag
                protocol.received(view[:n], stamp + offset, lag)  # parsed in place: the body pieces come out as bytes
            else:
                protocol.received(view[:n], wall() + offset)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._watching:
            self.loop.remove_reader(self._fd)
            self._watching = False
        self._epoll.close()


class HttpPool:
    """Keep-alive connections to one origin; idle ones older than `keepalive_expiry_s` are not reused."""

    def __init__(self, base_url: str, clock: Clock, keepalive_expiry_s: float = 2.0) -> None:
        self.origin = Origin.parse(base_url)
        self._clock = clock
        self._expiry = keepalive_expiry_s
        self._idle: list[_Connection] = []
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if self.origin.scheme == "https" else None
        self._reader: _BatchReader | None = None
        self._addresses: list[tuple[Any, ...]] | None = None
        # Kernel receive stamps and batched reads for plain http where the platform has them.
        self.kernel_stamps = self._ssl is None and kernel_stamps.available()

    async def request(self, request: bytes, sink: BodySink, on_sent: Callable[[float], None]) -> float | None:
        """Send one request and feed its response to `sink` until it ends; `on_sent(t)` gets the send stamp.
        Returns how late the response's bytes were read at worst (None without receive stamps).

        Cancelling it closes the connection, which is how a stream is cancelled."""
        conn = await self._acquire()
        try:
            t_sent, done = conn.start(request, sink)
        except Exception as e:
            conn.close()
            raise ClosedBeforeAnswering("Connection error.") from e
        on_sent(t_sent)
        try:
            await done
        except BaseException:
            conn.close()
            raise
        return conn.read_lag

    async def _acquire(self) -> _Connection:
        now = asyncio.get_running_loop().time()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < self._expiry:
                return conn
            conn.close()
        o = self.origin
        loop = asyncio.get_running_loop()
        try:
            if self.kernel_stamps:
                return await self._open_stamped(loop)
            _, conn = await loop.create_connection(
                lambda: _Connection(self._clock, self._release),
                o.host,
                o.port,
                ssl=self._ssl,
                server_hostname=o.host if self._ssl else None,
            )
        except OSError as e:
            raise APIConnectionError("Connection error.") from e
        return conn

    async def _open_stamped(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        """A connection on a plain socket whose receives the kernel stamps, read by this pool's batch reader."""
        if self._reader is None or self._reader.loop is not loop:
            self._reader = _BatchReader(loop, self._clock)
        infos = self._addresses
        if infos is None:  # resolved once: each resolution is a round trip through the loop's thread pool
            infos = await loop.getaddrinfo(self.origin.host, self.origin.port, type=socket.SOCK_STREAM)
        error: OSError = OSError(f"no address for {self.origin.host}")
        for i, (family, kind, proto, _, address) in enumerate(infos):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                kernel_stamps.enable(sock)  # before any byte can arrive
                await loop.sock_connect(sock, address)
            except OSError as e:
                sock.close()
                error = e
                continue
            except BaseException:
                sock.close()
                raise
            conn = _Connection(self._clock, self._release)
            transport = _SocketTransport(sock, self._reader, conn)
            conn.connection_made(transport)  # type: ignore[arg-type]  # duck-typed transport: the methods asyncio's protocol calls
            self._reader.add(transport)
            self._addresses = infos[i:] + infos[:i]  # the address that answered first next time
            return conn
        self._addresses = None  # none answered: resolve again next time
        raise error

    def _release(self, conn: _Connection) -> None:
        conn.idle_since = asyncio.get_running_loop().time()
        self._idle.append(conn)

    async def aclose(self) -> None:
        """Close every idle connection."""
        for conn in self._idle:
            conn.close()
        self._idle.clear()
        if self._reader is not None and self._reader.empty:
            self._reader.close()
            self._reader = None
