"""The sim's listening socket and connections, on plain sockets read with `recvmsg`: each connection knows when the
kernel received the first bytes of the request it is on, so a request's `arrived` is when it reached the sim, not
when the sim's event loop got round to it.

Under load the loop runs late (a decode step writes hundreds of chunks; the host takes the core away now and then),
and a request stamped as its handler starts looked as if it had reached the sim milliseconds after it did: the
client's TTFT then seemed too long against a "truth" that was itself late. With the kernel's stamp the sim's
`arrived` is as true as the client's `t_sent`. aiohttp serves the HTTP on top, as on asyncio's own transports; only
the bytes' carrier is ours (`StampedTransport`), so the sim behaves the same with or without it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

from evalkit.client import kernel_stamps
from evalkit.clock import Clock

_READ_SIZE = 256 * 1024
_HIGH_WATER = 64 * 1024


class StampedTransport(asyncio.Transport):
    """An asyncio transport over a connected non-blocking socket, reading with the kernel's receive stamps."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        protocol: asyncio.Protocol,
        clock: Clock,
        view: memoryview,
    ) -> None:
        super().__init__()
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._protocol = protocol
        self._clock = clock
        self._view = view
        self._out = bytearray()
        self._closing = False
        self._lost = False
        self._reading = True
        self._writing_paused = False
        self._arrival: float | None = None
        self._extra = {"socket": sock, "peername": _name(sock.getpeername), "sockname": _name(sock.getsockname)}
        protocol.connection_made(self)
        loop.add_reader(self._fd, self._read)

    # -- what the sim asks ---------------------------------------------------------------------------------
    def take_arrival(self) -> float | None:
        """When the first bytes read since the last call arrived (on the sim's clock); None when nothing came."""
        t, self._arrival = self._arrival, None
        return t

    # -- reading -------------------------------------------------------------------------------------------
    def _read(self) -> None:
        try:
            n, ancdata, _, _ = self._sock.recvmsg_into([self._view], kernel_stamps.ANCILLARY_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._fatal(e)
            return
        if n == 0:
            self._loop.remove_reader(self._fd)
            self._reading = False
            if not self._protocol.eof_received():
                self.close()
            return
        if self._arrival is None:
            stamp = kernel_stamps.stamp_of(ancdata)
            now = self._clock.now()
            self._arrival = now if stamp is None else min(now, stamp + kernel_stamps.clock_offset(self._clock))
        self._protocol.data_received(bytes(self._view[:n]))

    def pause_reading(self) -> None:
        if self._reading and not self._closing:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if not self._reading and not self._closing:
            self._reading = True
            self._loop.add_reader(self._fd, self._read)

    def is_reading(self) -> bool:
        return self._reading

    # -- writing -------------------------------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or self._lost:
            return  # as asyncio's transports do: a write after close is dropped
        if not data:
            return
        if not self._out:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as e:
                self._fatal(e)
                return
            if sent == len(data):
                return
            data = memoryview(data)[sent:]
            self._loop.add_writer(self._fd, self._flush)
        self._out += data
        if not self._writing_paused and len(self._out) > _HIGH_WATER:
            self._writing_paused = True
            self._protocol.pause_writing()

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def _flush(self) -> None:
        try:
            sent = self._sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._fatal(e)
            return
        del self._out[:sent]
        if self._writing_paused and len(self._out) <= _HIGH_WATER // 4:
            self._writing_paused = False
            self._protocol.resume_writing()
        if not self._out:
            self._loop.remove_writer(self._fd)
            if self._closing:
                self._connection_lost(None)

    def get_write_buffer_size(self) -> int:
        return len(self._out)

    def can_write_eof(self) -> bool:
        return False

    # -- closing -------------------------------------------------------------------------------------------
    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Close once what is buffered has gone out (the protocol hears of it on the next loop turn)."""
        if self._closing:
            return
        self._closing = True
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)
        if not self._out:
            self._loop.call_soon(self._connection_lost, None)

    def abort(self) -> None:
        self._fatal(None)

    def _fatal(self, exc: Exception | None) -> None:
        self._closing = True
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)
        if self._out:
            self._out.clear()
            self._loop.remove_writer(self._fd)
        self._loop.call_soon(self._connection_lost, exc)

    def _connection_lost(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        try:
            self._protocol.connection_lost(exc)
        finally:
            self._sock.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol  # type: ignore[assignment]  # asyncio hands a BaseProtocol; ours is always a Protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol


class StampedServer:
    """Accepts connections on a listening socket and gives each a `StampedTransport` and a fresh protocol."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
        clock: Clock,
    ) -> None:
        self._loop = loop
        self.sockets = [sock]
        self._sock = sock
        self._factory = protocol_factory
        self._clock = clock
        self._view = memoryview(bytearray(_READ_SIZE))  # one read buffer: the loop reads one socket at a time
        loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(128):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # out of descriptors, a connection reset before it was taken: try at the next wake
            conn.setblocking(False)
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            kernel_stamps.enable(conn)
            StampedTransport(self._loop, conn, self._factory(), self._clock, self._view)

    def close(self) -> None:
        """Stop accepting (connections already made are the protocols' to close)."""
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()


async def serve_stamped(
    protocol_factory: Callable[[], asyncio.Protocol], host: str, port: int, clock: Clock
) -> StampedServer:
    """Listen on host:port (port 0: any free one) with kernel-stamped connections."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        kernel_stamps.enable(sock)  # accepted sockets inherit it; set again on each to be sure
        sock.bind(address)
        sock.listen(1024)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return StampedServer(loop, sock, protocol_factory, clock)


def _name(getter: Callable[[], Any]) -> Any:
    try:
        return getter()
    except OSError:
        return None
