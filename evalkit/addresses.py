"""Local network addresses: the server root of an OpenAI-compatible base URL, and a free local port."""

from __future__ import annotations

import socket


def server_root(base_url: str) -> str:
    """`http://host:port` of a base URL like `http://host:port/v1` (a trailing slash or none)."""
    url = base_url.rstrip("/")
    return url.removesuffix("/v1")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]  # an AF_INET socket's name: (host, port)
        return port
