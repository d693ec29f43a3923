"""Run directories: `manifest.json`, append-only JSONL written as results arrive, `summary.json` at the end.

A run killed at any point loses no completed line: each line is written and flushed whole, a torn last line
(SIGKILL mid-write) is cut off when the run is reopened, and reopening with the same name resumes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from evalkit import __version__
from evalkit.errors import UsageError
from evalkit.redact import known_forms, scrub_known

MANIFEST = "manifest.json"
SUMMARY = "summary.json"
REQUESTS = "requests.jsonl"


def utc_now_iso() -> str:
    """The current UTC time in ISO 8601 with a `Z`-less offset."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def default_run_name(kind: str) -> str:
    """`<kind>-YYYYmmdd-HHMMSS` in local time."""
    return f"{kind}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def _owner_only(path: Path, flags: int) -> int:
    # Run files can hold a server's words: owner-only (0600) from the moment they exist, whatever the umask.
    fd = os.open(path, flags | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def write_json_atomic(path: Path, data: Any, secrets: tuple[str, ...] = ()) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half a file; owner-only, with
    each of `secrets` (from `redact.known_forms`) replaced."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    text = scrub_known(json.dumps(data, indent=2, sort_keys=False, default=str), secrets) + "\n"
    with open(_owner_only(tmp, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON line of a file; a torn last line is skipped."""
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def _cut_torn_tail(path: Path) -> None:
    # A SIGKILL during a write can leave a last line without its newline; drop it so appends stay valid.
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return
        f.truncate(data.rfind(b"\n") + 1)


@dataclass
class RunDir:
    """One run's directory; open it with `RunDir.create` and write only through its methods."""

    path: Path
    kind: str
    resumed: bool
    secrets: tuple[str, ...] = ()  # the API key's forms (`redact.known_forms`): never written, whatever holds it

    @classmethod
    def create(cls, out: Path | str, name: str, kind: str, manifest: dict[str, Any],
               secrets: tuple[str | None, ...] = ()) -> "RunDir":
        """Create `out/name`, or reopen it to resume when it holds an unfinished-or-finished run of `kind`.
        `secrets` (the API key) are replaced in everything written through this object."""
        forms = known_forms(secrets)
        path = Path(out) / name
        man_path = path / MANIFEST
        if man_path.exists():
            old = json.loads(man_path.read_text(encoding="utf-8"))
            if old.get("kind") != kind:
                raise UsageError(f"run directory {path} holds a {old.get('kind')!r} run, not {kind!r}")
            old.setdefault("resumes", []).append({"at": utc_now_iso(), "command": _command_line()})
            old["finished"] = None
            write_json_atomic(man_path, old, forms)
            for f in path.glob("*.jsonl"):
                _cut_torn_tail(f)
            return cls(path=path, kind=kind, resumed=True, secrets=forms)
        path.mkdir(parents=True, exist_ok=True)
        full = {
            "kind": kind,
            "evalkit_version": __version__,
            "started": utc_now_iso(),
            "finished": None,
            "command": _command_line(),
            **manifest,
        }
        write_json_atomic(man_path, full, forms)
        return cls(path=path, kind=kind, resumed=False, secrets=forms)

    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest as it is on disk."""
        return json.loads((self.path / MANIFEST).read_text(encoding="utf-8"))

    def update_manifest(self, **fields: Any) -> None:
        """Merge fields into the manifest (for facts learned during the run)."""
        man = self.manifest
        man.update(fields)
        write_json_atomic(self.path / MANIFEST, man, self.secrets)

    def write_json(self, filename: str, data: Any) -> None:
        """Write one more JSON file of the run (`check.json`, ...) atomically, owner-only, secrets replaced."""
        write_json_atomic(self.path / filename, data, self.secrets)

    def append(self, filename: str, record: dict[str, Any]) -> None:
        """Append one JSON line and flush it to the OS before returning."""
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        if self.secrets:
            line = scrub_known(line, self.secrets)
        with open(_owner_only(self.path / filename, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def read(self, filename: str) -> list[dict[str, Any]]:
        """All complete lines of one of this run's JSONL files."""
        return read_jsonl(self.path / filename)

    def done_keys(self, filename: str, key: str, where: Iterable[str] = ("ok",)) -> set[Any]:
        """Values of `key` over lines already written (optionally only those whose `status` is in `where`)."""
        allowed = set(where) if where else None
        return {
            r.get(key)
            for r in self.read(filename)
            if allowed is None or r.get("status", "ok") in allowed
        }

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Write `summary.json` atomically."""
        write_json_atomic(self.path / SUMMARY, summary, self.secrets)

    def finish(self, **fields: Any) -> None:
        """Stamp the finish time (and any closing facts) in the manifest."""
        self.update_manifest(finished=utc_now_iso(), **fields)


def _command_line() -> list[str]:
    return [Path(sys.argv[0]).name, *sys.argv[1:]]


def iter_runs(paths: Iterable[Path | str]) -> Iterator[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """(path, manifest, summary) for each run directory given; a missing file is a usage error."""
    for p in paths:
        p = Path(p)
        if not (p / MANIFEST).exists() or not (p / SUMMARY).exists():
            raise UsageError(f"{p} is not a finished run directory (needs {MANIFEST} and {SUMMARY})")
        yield p, json.loads((p / MANIFEST).read_text()), json.loads((p / SUMMARY).read_text())
