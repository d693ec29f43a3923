"""The one HTTP stack for auxiliary calls, on aiohttp: the model list, `/metrics` scrapes, `/props` and the other
identity endpoints, `/tokenize`, and the preflight's probes. Every module that makes such a call takes its session,
timeout and error types from here (tests/test_import_layers.py checks that none imports aiohttp itself).

The measured requests never come here: they go through evalkit.client.chat on evalkit's own transport
(evalkit.client.http_stream), which stamps each chunk with the kernel's receive time.
"""

from __future__ import annotations

from aiohttp import ClientError, ClientSession, ClientTimeout

__all__ = ["ClientError", "ClientSession", "ClientTimeout"]
