"""When a socket's bytes arrived, from the kernel: the receive stamp Linux keeps for every packet (`SO_TIMESTAMPNS`).

An event loop reads a socket only when it gets round to it; under load that is milliseconds after the bytes came
in. The kernel stamps each packet as it arrives, and `recvmsg` hands the stamp of the last packet it read over with
the data. Both ends of a measurement use it: the client for when a token arrived, the sim for when a request did.
The stamp is wall-clock time (CLOCK_REALTIME); adding `clock_offset` puts it on evalkit's `Clock`, the offset read
at the time of the read, so a wall-clock step since the clock's anchoring does not move it.

One limit, the kernel's: packets that queue unread are merged into one buffer that keeps the newest packet's stamp
(seen: a first token read 150 ms late together with the next token got the next token's stamp, even when the read
took the first token's bytes alone). A client that keeps up reads each token on its own; how late it read is
`read_lag_s`, and `evalkit.client.lag` says when that made the client the bottleneck.
"""

from __future__ import annotations

import socket
import struct
import sys
import time

from evalkit.clock import Clock

# Linux's value where Python's socket module does not name it.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
ANCILLARY_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_TIMESPEC = struct.Struct("qq")


def available() -> bool:
    """Whether this platform can stamp receives (Linux, with `recvmsg_into`)."""
    return sys.platform.startswith("linux") and hasattr(socket.socket, "recvmsg_into") and ANCILLARY_SPACE > 0


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp `sock`'s receives; False where it refuses."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def stamp_of(ancdata: list[tuple[int, int, bytes]]) -> float | None:
    """The receive stamp (epoch seconds) in `recvmsg`'s ancillary data; None when there is none."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return float(sec + nsec * 1e-9)
    return None


def clock_offset(clock: Clock, tries: int = 5) -> float:
    """`clock` minus wall-clock time (near 0 unless the wall clock stepped since the clock was anchored).

    Read between two reads of `clock`, the tightest pair of a few kept: a process preempted between one clock read
    and the other (a loaded VM: 150 us was seen) would otherwise put every stamp of its batch that much early."""
    best_width, best = float("inf"), 0.0
    for _ in range(tries):
        before = clock.now()
        wall = time.time()
        after = clock.now()
        if after - before < best_width:
            best_width, best = after - before, (before + after) / 2 - wall
            if best_width < 1e-6:
                break
    return best
