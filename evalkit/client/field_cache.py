"""The field-support cache: what a server accepts, kept per base URL and server identity for a day.

One JSON file under the user's cache directory (`$EVALKIT_CACHE_DIR`, else `$XDG_CACHE_HOME/evalkit`, else
`~/.cache/evalkit`): `field-support.json`, `{key: {"at": epoch, "base_url": .., "support": {...}}}`. The key hashes
the base URL with what the server says about itself (type, version, build, models), so another build or model on the
same port is probed again. `EVALKIT_NO_FIELD_CACHE=1` turns it off (the test suite does: its sims reuse ports).
A cache that cannot be read or written is ignored: it only saves a few requests.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TypedDict, cast

from evalkit.client.field_support import FieldSupport, FieldSupportJson
from evalkit.client.identity_json import ServerIdentity

MAX_AGE_S = 24 * 3600
FILE = "field-support.json"


def cache_file() -> Path | None:
    """Where the cache lives, or None when it is turned off."""
    if os.environ.get("EVALKIT_NO_FIELD_CACHE"):
        return None
    base = os.environ.get("EVALKIT_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = str(Path(xdg) / "evalkit")
    return Path(base) / FILE


def cache_key(base_url: str, identity: ServerIdentity | None) -> str:
    """The base URL and the server's identity (without which endpoints answered), hashed."""
    ident = {k: v for k, v in (identity or {}).items() if k != "probed"}
    text = json.dumps({"base_url": base_url.rstrip("/"), "identity": ident}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class CacheEntry(TypedDict):
    """One server's entry in the cache file, in the order written."""

    at: float
    base_url: str
    support: FieldSupportJson


def _read(path: Path) -> dict[str, CacheEntry]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    # Only entries with a time of writing: the others are neither used nor kept.
    return {
        k: cast(CacheEntry, v) for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("at"), (int, float))
    }


def load(base_url: str, identity: ServerIdentity | None, now: float | None = None) -> FieldSupport | None:
    """The cached support for this server, when fresh."""
    path = cache_file()
    if path is None:
        return None
    entry = _read(path).get(cache_key(base_url, identity))
    now = time.time() if now is None else now
    if entry is None or now - entry["at"] > MAX_AGE_S:
        return None
    when = datetime.fromtimestamp(entry["at"], timezone.utc).isoformat(timespec="seconds")
    try:
        return FieldSupport.from_json(entry.get("support") or cast(FieldSupportJson, {}), f"cache {path} ({when})")
    except TypeError:
        return None


def store(base_url: str, identity: ServerIdentity | None, support: FieldSupport) -> None:
    """Keep this server's support (an atomic rewrite; stale entries dropped)."""
    path = cache_file()
    if path is None:
        return
    now = time.time()
    data = {k: v for k, v in _read(path).items() if now - v["at"] <= MAX_AGE_S}
    data[cache_key(base_url, identity)] = {"at": now, "base_url": base_url, "support": support.to_json()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".field-support-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass
