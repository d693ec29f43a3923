"""Run directories: `manifest.json`, append-only JSONL written as results arrive, `summary.json` at the end.

A run killed at any point loses no completed line: each line goes to the file in one `write` and is flushed, a
torn last line (SIGKILL mid-write) is cut off when the run is reopened, and reopening with the same name resumes.
One process writes a run directory at a time (a lock held for the whole run; a second writer exits 2 naming the
holder); report and gate read without it. A write that fails (a full disk, an I/O error) ends the run with one
line naming the file, exit 1, and a manifest and summary that say the run is incomplete.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from evalkit import __version__
from evalkit.errors import UsageError
from evalkit.redact import known_forms, scrub_known
from evalkit.runs.json_value import JsonValue
from evalkit.runs.run_identity import first_difference, recorded_defines

if TYPE_CHECKING:
    from pydantic import BaseModel

_M = TypeVar("_M", bound="BaseModel")

Line = dict[str, Any]  # one parsed line of a JSONL run file (requests.jsonl, metrics.jsonl ...)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, one writer is the user's care
    fcntl = None  # type: ignore[assignment]  # the module, or None where it does not exist

MANIFEST = "manifest.json"
SUMMARY = "summary.json"
REQUESTS = "requests.jsonl"
LOCK = ".evalkit.lock"
# Space kept aside while a run writes, given back when a write fails so the incomplete manifest and summary fit.
RESERVE = ".evalkit.reserve"
RESERVE_BYTES = 256 * 1024
SCHEMA_VERSION = 1


class RunWriteError(UsageError):
    """A run file could not be written (full disk, I/O error): one line naming the path, exit 1."""

    exit_code = 1


def utc_now_iso() -> str:
    """The current UTC time in ISO 8601 with a `Z`-less offset."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def default_run_name(kind: str) -> str:
    """`<kind>-YYYYmmdd-HHMMSS` in local time."""
    return f"{kind}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def _write_error(path: Path, e: OSError) -> RunWriteError:
    return RunWriteError(
        f"cannot write {path}: {e.strerror or e}; the run is incomplete (resume it with the same "
        "--name once the disk has room)"
    )


def _owner_only(path: Path, flags: int) -> int:
    # Run files can hold a server's words: owner-only (0600) from the moment they exist, whatever the umask.
    fd = os.open(path, flags | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def write_json_atomic(path: Path, data: Any, secrets: tuple[str, ...] = ()) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half a file; owner-only, with
    each of `secrets` (from `redact.known_forms`) replaced."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    text = scrub_known(json.dumps(data, indent=2, sort_keys=False, default=str, allow_nan=True), secrets) + "\n"
    try:
        with open(_owner_only(tmp, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise _write_error(path, e) from None


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding one object; anything else (missing, non-UTF-8, not JSON, not an object) exits 2."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: file not found") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{path}: not JSON ({_json_reason(e)})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object, found {_json_type(data)}")
    return data


def _json_reason(e: ValueError) -> str:
    return str(e).splitlines()[0][:120]


def _json_type(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number"
    )


def read_records(path: Path, model: type[_M]) -> list[_M]:
    """Every complete line of a JSONL run file as its record (`evalkit.runs.schemas`): a line that is not one exits
    2 naming the file, the line and the key; a torn last line is skipped."""
    from evalkit.runs.schemas import validate

    return [cast(_M, validate(model, obj, f"{path}:{n}")) for n, obj in _json_lines(path)]


def read_jsonl(path: Path, schema: Any = None) -> list[dict[str, Any]]:
    """Every complete JSON line of a file; a torn last line is skipped, a bad line elsewhere exits 2 naming it.

    With `schema` (an `evalkit.runs.schemas` model), each line is also checked against it.
    """
    if schema is not None:
        from evalkit.runs.schemas import validate
    out = []
    for n, obj in _json_lines(path):
        if schema is not None:
            validate(schema, obj, f"{path}:{n}")
        out.append(obj)
    return out


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, JsonValue]]]:
    """(line number, object) of each complete JSON line; a torn last line is skipped."""
    if not path.exists():
        return
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"{path}: cannot read ({e.strerror or e})") from None
    lines = data.split(b"\n")
    # The last element is what follows the last newline: empty for a whole file, a torn line otherwise.
    for n, raw in enumerate(lines[:-1], 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise UsageError(f"{path}:{n}: not UTF-8 text (byte {e.start} of the line)") from None
        except ValueError as e:
            raise UsageError(f"{path}:{n}: not a JSON line ({_json_reason(e)})") from None
        if not isinstance(obj, dict):
            raise UsageError(f"{path}:{n}: expected a JSON object, found {_json_type(obj)}")
        yield n, obj


def _cut_torn_tail(path: Path) -> None:
    # A SIGKILL during a write can leave a last line without its newline; drop it so appends stay valid.
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return
        f.truncate(data.rfind(b"\n") + 1)


def _check_lines(path: Path) -> None:
    from evalkit.runs.schemas import GradedLine, RequestLine

    schemas = {REQUESTS: RequestLine, "graded.jsonl": GradedLine}
    for f in sorted(path.glob("*.jsonl")):
        read_jsonl(f, schemas.get(f.name))


def _holder(lock_path: Path) -> str:
    try:
        text = lock_path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        text = ""
    pid, _, command = text.partition(" ")
    return f"pid {pid} ({command})" if pid else "another process"


def _take_lock(path: Path) -> Any:
    """Hold `path/.evalkit.lock` for this process's lifetime (POSIX record lock); a second writer exits 2."""
    if fcntl is None:
        return None
    lock_path = path / LOCK
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:  # a full disk, a read-only one: one line, as for any run file (issue #56)
        raise _write_error(lock_path, e) from None
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise UsageError(
            f"run directory {path} is being written by {_holder(lock_path)}; wait for it to end or pick another --name"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {' '.join(_command_line())}\n".encode("utf-8", "replace"), 0)
    except OSError as e:
        os.close(fd)
        raise _write_error(lock_path, e) from None
    return fd


@dataclass
class RunDir:
    """One run's directory; open it with `RunDir.create` and write only through its methods."""

    path: Path
    kind: str
    resumed: bool
    secrets: tuple[str, ...] = ()  # the API key's forms (`redact.known_forms`): never written, whatever holds it
    _lock_fd: Any = field(default=None, repr=False, compare=False)
    _append_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    failed: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def create(
        cls,
        out: Path | str,
        name: str,
        kind: str,
        manifest: dict[str, JsonValue],
        secrets: tuple[str | None, ...] = (),
        defines: dict[str, JsonValue] | None = None,
        fresh: bool = False,
        server_moved: bool = False,
        scope: dict[str, JsonValue] | None = None,
    ) -> RunDir:
        """Create `out/name`, or reopen it to resume an unfinished run of `kind` with the same `defines`
        (`runs.run_identity`; `server_moved`: its URL may differ). Another run there exits 2 naming what differs, a
        complete one raises `RunFinished` unless its `scope` (what is asked, e.g. capability's questions: not part of
        `defines`) grew; `fresh` deletes an old run there first. `secrets` (the API key) are
        replaced in everything written through this object."""
        forms = known_forms(secrets)
        path = Path(out) / name
        man_path = path / MANIFEST
        if man_path.exists() and fresh:
            _clear_run(path)
        if man_path.exists():
            old = read_json_object(man_path)
            if old.get("kind") != kind:
                raise UsageError(
                    f"run directory {path} holds a {old.get('kind')!r} run, not {kind!r}; pick another --name, "
                    "or add --fresh to replace it"
                )
            _check_lines(path)  # a resume must not stamp the manifest of a run it cannot read
            if defines is not None:
                diff = first_difference(recorded_defines(old), defines, server_moved)
                if diff is not None:
                    raise UsageError(diff.line(path))
            if old.get("finished") and old.get("complete") and (scope is None or old.get("scope") == _plain(scope)):
                raise RunFinished(path, int(old.get("exit_code") or 0))
            lock = _take_lock(path)
            rd = cls(path=path, kind=kind, resumed=True, secrets=forms, _lock_fd=lock)
            old.setdefault("resumes", []).append({"at": utc_now_iso(), "command": _command_line()})
            old["finished"] = None
            for stale in ("incomplete", "complete", "exit_code"):
                old.pop(stale, None)
            if defines is not None:
                old["defines"] = defines  # an older run gains the full record on its first resume
            if scope is not None:
                old["scope"] = scope
            rd._reserve()
            rd._guard(lambda: write_json_atomic(man_path, old, forms))
            for f in path.glob("*.jsonl"):
                rd._guard(functools.partial(_cut_torn_tail, f))
            return rd
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"cannot create the run directory {path}: {e.strerror or e}") from None
        rd = cls(path=path, kind=kind, resumed=False, secrets=forms, _lock_fd=_take_lock(path))
        full = {
            "schema_version": SCHEMA_VERSION,
            "kind": kind,
            "evalkit_version": __version__,
            "started": utc_now_iso(),
            "finished": None,
            "command": _command_line(),
            **manifest,
            **({"defines": defines} if defines is not None else {}),
            **({"scope": scope} if scope is not None else {}),
        }
        rd._reserve()
        rd._guard(lambda: write_json_atomic(man_path, full, forms))
        return rd

    def _reserve(self) -> None:
        try:
            with open(self.path / RESERVE, "wb") as f:
                f.write(b"\0" * RESERVE_BYTES)
        except OSError:
            (self.path / RESERVE).unlink(missing_ok=True)  # no room even for this: the first write will say so

    def _guard(self, write: Callable[[], None]) -> None:
        """Run one write; on failure give the reserve back, mark the run incomplete, and raise one line."""
        try:
            write()
        except RunWriteError as e:
            self._mark_incomplete(str(e))
            raise
        except OSError as e:
            err = _write_error(self.path, e)
            self._mark_incomplete(str(err))
            raise err from None

    def _mark_incomplete(self, reason: str) -> None:
        if self.failed is not None:
            return
        self.failed = reason
        (self.path / RESERVE).unlink(missing_ok=True)
        note = {"at": utc_now_iso(), "error": reason}
        try:
            man = read_json_object(self.path / MANIFEST)
            man.update(finished=None, incomplete=note)
            write_json_atomic(self.path / MANIFEST, man, self.secrets)
            write_json_atomic(
                self.path / SUMMARY,
                {"schema_version": SCHEMA_VERSION, "kind": self.kind, "incomplete": note},
                self.secrets,
            )
        except (UsageError, OSError):
            pass  # the disk took even the reserve's room back: the manifest's `finished: null` still says it

    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest as it is on disk."""
        return read_json_object(self.path / MANIFEST)

    def update_manifest(self, **fields: Any) -> None:
        """Merge fields into the manifest (for facts learned during the run)."""
        man = self.manifest
        man.update(fields)
        self._guard(lambda: write_json_atomic(self.path / MANIFEST, man, self.secrets))

    def write_json(self, filename: str, data: Any) -> None:
        """Write one more JSON file of the run (`check.json`, ...) atomically, owner-only, secrets replaced."""
        self._guard(lambda: write_json_atomic(self.path / filename, data, self.secrets))

    def append(self, filename: str, record: dict[str, Any]) -> None:
        """Append one JSON line in a single write and flush it to the OS; a failed write leaves no torn line."""
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        data = (scrub_known(line, self.secrets) if self.secrets else line).encode("utf-8")
        target = self.path / filename
        with self._append_lock:
            if self.failed is not None:
                raise RunWriteError(self.failed)
            fd = None
            size = None
            try:
                fd = _owner_only(target, os.O_WRONLY | os.O_APPEND)
                size = os.fstat(fd).st_size
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(28, os.strerror(28))  # a short write is a full disk in all but name
                os.fsync(fd)
            except OSError as e:
                if fd is not None and size is not None:
                    try:
                        os.ftruncate(fd, size)
                    except OSError:
                        pass
                err = _write_error(target, e)
                self._mark_incomplete(str(err))
                raise err from None
            finally:
                if fd is not None:
                    os.close(fd)

    def rewrite(self, filename: str, records: list[dict[str, JsonValue]]) -> None:
        """Replace a JSONL file with `records` atomically (compacting superseded lines on resume)."""
        target = self.path / filename
        tmp = target.with_suffix(target.suffix + ".tmp")

        def write() -> None:
            with open(_owner_only(tmp, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as f:
                for r in records:
                    line = json.dumps(r, ensure_ascii=False, default=str) + "\n"
                    f.write(scrub_known(line, self.secrets) if self.secrets else line)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)

        try:
            self._guard(write)
        finally:
            tmp.unlink(missing_ok=True)

    def read(self, filename: str) -> list[dict[str, Any]]:
        """All complete lines of one of this run's JSONL files."""
        return read_jsonl(self.path / filename)

    def done_keys(self, filename: str, key: str, where: Iterable[str] = ("ok",)) -> set[Any]:
        """Values of `key` over lines already written (optionally only those whose `status` is in `where`)."""
        allowed = set(where) if where else None
        return {r.get(key) for r in self.read(filename) if allowed is None or r.get("status", "ok") in allowed}

    def write_summary(self, summary: dict[str, JsonValue]) -> None:
        """Write `summary.json` atomically."""
        if self.failed is not None:
            raise RunWriteError(self.failed)
        data = {"schema_version": SCHEMA_VERSION, **summary}
        self._guard(lambda: write_json_atomic(self.path / SUMMARY, data, self.secrets))

    def finish(self, exit_code: int = 0, complete: bool = True, **fields: Any) -> None:
        """Stamp the finish time, the run's exit code and whether anything is left to redo (`complete`: a start
        again says it is finished), with any closing facts, in the manifest; give the reserved space back."""
        if self.failed is not None:
            raise RunWriteError(self.failed)
        self.update_manifest(finished=utc_now_iso(), exit_code=exit_code, complete=complete, **fields)
        (self.path / RESERVE).unlink(missing_ok=True)


class RunFinished(Exception):
    """The run directory holds this very run, complete: nothing to do but say so (`say`) and exit with its code."""

    def __init__(self, path: Path, exit_code: int) -> None:
        super().__init__(str(path))
        self.path = path
        self.exit_code = exit_code  # as the finished run's manifest records it

    @property
    def summary(self) -> dict[str, JsonValue]:
        """The finished run's summary.json."""
        return read_json_object(self.path / SUMMARY)

    def say(self) -> None:
        """The one line on standard error that says the run is finished."""
        print(
            f"{self.path} is finished (exit {self.exit_code}): its own figures follow; add --fresh to measure again, "
            "or give another --name",
            file=sys.stderr,
            flush=True,
        )


def _plain(v: Any) -> Any:
    # As a manifest reads it back: tuples become lists.
    return json.loads(json.dumps(v, default=str))


def _clear_run(path: Path) -> None:
    """`--fresh`: delete an old run's files, under its lock (a run still writing there refuses)."""
    fd = _take_lock(path)
    try:
        for entry in path.iterdir():
            if entry.name == LOCK:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    except OSError as e:
        raise UsageError(f"--fresh: cannot delete the old run in {path}: {e.strerror or e}") from None
    finally:
        if fd is not None:
            os.close(fd)


def _command_line() -> list[str]:
    return [Path(sys.argv[0]).name, *sys.argv[1:]]


def iter_runs(paths: Iterable[Path | str]) -> Iterator[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """(path, manifest, summary) for each run directory given; a missing or malformed file is a usage error."""
    from evalkit.runs.schemas import Manifest, Summary, validate

    for p in paths:
        p = Path(p)
        if not (p / MANIFEST).exists() or not (p / SUMMARY).exists():
            raise UsageError(f"{p} is not a finished run directory (needs {MANIFEST} and {SUMMARY})")
        man = read_json_object(p / MANIFEST)
        summ = read_json_object(p / SUMMARY)
        validate(Manifest, man, p / MANIFEST)
        validate(Summary, summ, p / SUMMARY)
        yield p, man, summ
