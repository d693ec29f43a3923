"""The floor under the client's CPU a chunk: what reading alone costs on this machine, with no HTTP, SSE or JSON.

A sender process (core 0) holds N TCP connections and writes one 200-byte piece on every one of them in one burst
every 20 ms, as a batched decode step would; the receiver (core 1) reads them the way evalkit's batch reader does
(uvloop, one epoll set, `recvmsg_into` with kernel receive stamps, a 1 ms hold between batches) and does nothing else
with the bytes. It prints the receiver's CPU (getrusage user + system) per read. Compare with bench_client_load's CPU
a chunk: the difference is what framing, parsing, the record and the requests cost.

`--sim` feeds the same reader from `evalkit sim` instead, with bench_client_load's own load (the same flags, 128
tokens at 50 tok/s a stream, two requests a stream one after the other, starts spread over one request's length): the
same sockets, the same bytes a chunk (chunked framing and the `data:` event) and the same arrival pattern (the sim
writes a decode step's tokens one transport after another, over milliseconds, not in one burst), so the reader wakes
as often as the client's does and reads as many sockets a wake-up. Its requests are written by hand and its
responses are only counted (a read that ends with the chunked terminator sends the stream's next request), so the
difference from bench_client_load's CPU a chunk is exactly framing, parsing, the record and the request machinery.

    python benchmarks/bench_read_floor.py [--streams 64,512] [--seconds 6] [--repeat 2] [--sim]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import select
import socket
import time

from evalkit.client import kernel_stamps
from evalkit.eventloop import fast_loop

PIECE = b"x" * 200


def _send(port: int, streams: int, seconds: float, ready: multiprocessing.synchronize.Event, cpu: int) -> None:
    """Accept `streams` connections, then write one piece on each every 20 ms for `seconds`, then close them."""
    os.sched_setaffinity(0, {cpu})
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(1024)
    ready.set()
    conns = []
    for _ in range(streams):
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conns.append(conn)
    end = time.monotonic() + seconds
    step = time.monotonic()
    while time.monotonic() < end:
        for conn in conns:
            conn.send(PIECE)
        step += 0.02
        time.sleep(max(0.0, step - time.monotonic()))
    for conn in conns:
        conn.close()
    srv.close()


def _receive(port: int, streams: int, cpu: int) -> dict:
    """Read until every connection closes; CPU per read and reads per batch."""
    os.sched_setaffinity(0, {cpu})
    socks = []
    for _ in range(streams):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        kernel_stamps.enable(sock)
        socks.append(sock)
    epoll = select.epoll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        epoll.register(fd, select.EPOLLIN)
    view = memoryview(bytearray(256 * 1024))
    space = kernel_stamps.ANCILLARY_SPACE
    counts = {"reads": 0, "batches": 0, "open": streams}

    async def run() -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def batch() -> None:
            counts["batches"] += 1
            for fd, _ in epoll.poll(0):
                sock = by_fd[fd]
                try:
                    n, _, _, _ = sock.recvmsg_into([view], space)
                except BlockingIOError:
                    continue
                if n == 0:
                    epoll.unregister(fd)
                    sock.close()
                    counts["open"] -= 1
                    if counts["open"] == 0 and not done.done():
                        done.set_result(None)
                    continue
                counts["reads"] += 1
                bytes(view[:n])

        def on_ready() -> None:
            loop.remove_reader(epoll.fileno())
            batch()
            loop.call_later(0.001, watch)

        def watch() -> None:
            if not done.done():
                loop.add_reader(epoll.fileno(), on_ready)

        watch()
        await done

    t0 = resource.getrusage(resource.RUSAGE_SELF)
    with fast_loop():
        asyncio.run(run())
    t1 = resource.getrusage(resource.RUSAGE_SELF)
    epoll.close()
    reads = max(1, counts["reads"])
    return {
        "reads": counts["reads"],
        "batches": counts["batches"],
        "user_us": (t1.ru_utime - t0.ru_utime) / reads * 1e6,
        "sys_us": (t1.ru_stime - t0.ru_stime) / reads * 1e6,
    }


def _sim_request(i: int, k: int, tokens: int) -> bytes:
    body = json.dumps(
        {
            "model": "evalkit-sim",
            "stream": True,
            "max_tokens": tokens,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": f"Tell me a story about {i}-{k}."}],
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"X-Request-Id: floor-{i}-{k}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def sim_floor_row(
    streams: int, recv_cpu: int, sim_cpus: set[int] | None, tokens: int = 128, rate: float = 50.0, per_stream: int = 2
) -> dict:
    """The reader fed by a sim (bench_client_load's flags): CPU per read and per token chunk (`data:` events)."""
    from evalkit.sim.launch import start_sim

    flags = ["--max-batch", str(streams), "--decode-rate", str(rate), "--batch-decode-rate", str(rate * streams)]
    before = os.sched_getaffinity(0)
    with start_sim([*flags, "--seed", "1"]) as sim:
        if sim_cpus:
            os.sched_setaffinity(sim.proc.pid, sim_cpus)
        os.sched_setaffinity(0, {recv_cpu})
        try:
            return _sim_receive(sim.port, streams, tokens, rate, per_stream)
        finally:
            os.sched_setaffinity(0, before)


def _sim_receive(port: int, streams: int, tokens: int, rate: float, per_stream: int) -> dict:
    socks = []
    for _ in range(streams):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        kernel_stamps.enable(sock)
        socks.append(sock)
    epoll = select.epoll()
    by_fd = {s.fileno(): i for i, s in enumerate(socks)}
    for fd in by_fd:
        epoll.register(fd, select.EPOLLIN)
    view = memoryview(bytearray(256 * 1024))
    space = kernel_stamps.ANCILLARY_SPACE
    sent = [0] * streams
    counts = {"reads": 0, "batches": 0, "events": 0, "open": streams * per_stream}
    period = tokens / rate

    async def run() -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def send(i: int) -> None:
            socks[i].send(_sim_request(i, sent[i], tokens))
            sent[i] += 1

        def batch() -> None:
            counts["batches"] += 1
            for fd, _ in epoll.poll(0):
                i = by_fd[fd]
                try:
                    n, _, _, _ = socks[i].recvmsg_into([view], space)
                except BlockingIOError:
                    continue
                counts["reads"] += 1
                piece = bytes(view[:n])
                counts["events"] += piece.count(b"data: {")
                if piece.endswith(b"0\r\n\r\n"):  # the chunked terminator: this answer is complete
                    counts["open"] -= 1
                    if sent[i] < per_stream:
                        send(i)
                    elif counts["open"] == 0 and not done.done():
                        done.set_result(None)

        def on_ready() -> None:
            loop.remove_reader(epoll.fileno())
            batch()
            loop.call_later(0.001, watch)

        def watch() -> None:
            if not done.done():
                loop.add_reader(epoll.fileno(), on_ready)

        start = loop.time() + 0.5
        for i in range(streams):
            loop.call_at(start + period * i / streams, send, i)
        watch()
        await done

    t0 = resource.getrusage(resource.RUSAGE_SELF)
    with fast_loop():
        asyncio.run(run())
    t1 = resource.getrusage(resource.RUSAGE_SELF)
    epoll.close()
    for sock in socks:
        sock.close()
    reads = max(1, counts["reads"])
    return {
        "reads": counts["reads"],
        "batches": counts["batches"],
        "events": counts["events"],
        "user_us": (t1.ru_utime - t0.ru_utime) / reads * 1e6,
        "sys_us": (t1.ru_stime - t0.ru_stime) / reads * 1e6,
        "cpu_us_per_event": (t1.ru_utime - t0.ru_utime + t1.ru_stime - t0.ru_stime) / max(1, counts["events"]) * 1e6,
    }


def floor_row(streams: int, seconds: float, send_cpu: int, recv_cpu: int) -> dict:
    """One measurement: a sender process on `send_cpu`, the reader here on `recv_cpu` (put back afterwards)."""
    port = 20000 + (os.getpid() * 7 + streams) % 20000
    ready = multiprocessing.get_context("fork").Event()
    sender = multiprocessing.get_context("fork").Process(target=_send, args=(port, streams, seconds, ready, send_cpu))
    sender.start()
    ready.wait()
    before = os.sched_getaffinity(0)
    try:
        row = _receive(port, streams, recv_cpu)
    finally:
        os.sched_setaffinity(0, before)
    sender.join()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="64,512")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--sim", action="store_true", help="fed by evalkit sim with bench_client_load's load")
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    send_cpu, recv_cpu = (cores[0], cores[1]) if len(cores) >= 2 else (cores[0], cores[0])
    print(
        f"read floor: sender on core {send_cpu}, receiver on core {recv_cpu}, one 200-byte piece a connection "
        f"every 20 ms; load average {os.getloadavg()[0]:.2f}"
    )
    print("| streams | reads | reads/batch | CPU/read (user+sys) |")
    print("|---|---|---|---|")
    for n in [int(x) for x in args.streams.split(",") for _ in range(max(1, args.repeat))]:
        row = sim_floor_row(n, recv_cpu, {send_cpu}) if args.sim else floor_row(n, args.seconds, send_cpu, recv_cpu)
        print(
            f"| {n} | {row['reads']} | {row['reads'] / max(1, row['batches']):.1f} | "
            f"{row['user_us'] + row['sys_us']:.1f} µs ({row['user_us']:.1f}+{row['sys_us']:.1f}) |"
            + (f" {row['events']} token events, {row['cpu_us_per_event']:.1f} µs an event" if "events" in row else ""),
            flush=True,
        )


if __name__ == "__main__":
    main()
