"""Deterministic draws: the same (seed, key) always gives the same number, in any process, on any run."""

from __future__ import annotations

import hashlib


def unit_draw(*parts: object) -> float:
    """A number in [0, 1) fixed by the parts (blake2b of their joined text)."""
    blob = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "big") / 2**64


def pick(n: int, *parts: object) -> int:
    """An index in range(n) fixed by the parts."""
    return min(n - 1, int(unit_draw(*parts) * n))
