"""What defines a run, so that a run directory started again resumes only the same run (issue 39).

A run directory's manifest keeps `defines`: the server's URL, the model, the parts of the server's identity
(`evidence.server_identity`) that name a build, and the options that shape the measurement (bench's
`--max-tokens`, capability's `--datasets`, ...). Starting the run again compares the two: the first field that
differs ends the command with one line naming it, old and new value, and the ways out (`--name`, `--fresh`).
Identity fields one side could not probe (None) are not compared: a timed-out `/props` is no other server.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from evalkit.runs.json_value import JsonValue

IDENTITY = "server identity"
URL = "server URL"
# Runs recorded before `defines` existed: what their manifests already said about the run.
_LEGACY = {URL: ("server", "base_url"), "model": ("model",)}


@dataclass(frozen=True)
class Difference:
    """One field whose value at this start differs from the run's."""

    field: str
    old: Any
    new: Any

    def line(self, path: Any) -> str:
        """The one line that refuses the resume and names the ways out."""
        moved = " (or --server-moved: the same server, restarted at another URL)" if self.field == URL else ""
        return (
            f"cannot resume {path}: {self.field} was {_show(self.old)} and is now {_show(self.new)}; "
            f"give this run another --name NEW, or add --fresh to start this one over (its old files are deleted)"
            + moved
        )


def _show(v: Any) -> str:
    if v is None:
        return "unset"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, default=str)


# What names a server's build (as the server reports it), by the words a refused resume shows ("the server's
# model_path was ...").
ServerFingerprint = TypedDict(
    "ServerFingerprint",
    {
        "server type": "str | None",
        "version": "JsonValue",
        "build_info": "JsonValue",  # as /props says it
        "total_slots": "JsonValue",  # as /props says it
        "n_ctx": "JsonValue",  # as /props says it
        "model_path": "JsonValue",  # as /props says it
        "server_info": "dict[str, JsonValue] | None",
        "models listed": "list[str] | None",
        "model entries": "str | None",
        "launch options": "str | None",
    },
)


def server_fingerprint(identity: Mapping[str, Any] | None) -> ServerFingerprint:
    """What in `server_identity` names the server build (not its state: no counters, no probe outcomes)."""
    ident = identity or {}
    props = ident.get("props") or {}
    info = {k: v for k, v in (ident.get("server_info") or {}).items() if k != "avg_spec_accept_length"}
    models = sorted(str(m.get("id")) for m in ident.get("models") or [] if isinstance(m, dict)) or None
    return {
        "server type": ident.get("server_type"),
        "version": ident.get("version"),
        "build_info": props.get("build_info"),
        "total_slots": props.get("total_slots"),
        "n_ctx": props.get("n_ctx"),
        "model_path": props.get("model_path"),
        "server_info": info or None,
        "models listed": models,
        "model entries": _digest(_model_entries(ident.get("models"))),
        "launch options": _launch_options(ident.get("launch_options")),
    }


def _digest(value: Any) -> str | None:
    """A short fingerprint of a JSON value (None for nothing): what the server says of itself, compared whole."""
    if not value:
        return None
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _model_entries(models: Any) -> list[Any] | None:
    # Every field a server lists of its models (a model file's size and parameters, vLLM's root and max_model_len)
    # but `created`, which vLLM stamps at each request.
    if not isinstance(models, list):
        return None
    entries = [{k: v for k, v in m.items() if k not in ("created", "id")} for m in models if isinstance(m, dict)]
    return [e for e in entries if e] or None


# What the sim reports of its launch that is not its build: injected faults and where it logs (a resume against
# the same build without its faults is the same run, retrying what they failed).
_CONDITIONS = {
    "fail_rate",
    "disconnect_rate",
    "stall_rate",
    "stall_s",
    "seed",
    "server_log",
    "trace_log",
    "log_timestamps",
    "data_dir",
}


def _launch_options(options: Any) -> str | None:
    """The options a server reports it was launched with (the sim's /sim/config): its profile, then a fingerprint
    of all of them but its injected faults and logs."""
    if not isinstance(options, dict) or not options:
        return None
    options = {k: v for k, v in options.items() if k not in _CONDITIONS}
    profile = options.get("profile")
    return f"{profile} ({_digest(options)})" if profile else _digest(options)


def run_defines(
    base_url: str | None, model: str | None, identity: Mapping[str, Any] | None, options: Mapping[str, Any]
) -> dict[str, JsonValue]:
    """`defines` for a manifest: `options` maps each defining flag (as the user types it) to its value."""
    return {
        URL: (base_url or "").rstrip("/") or None,
        "model": model,
        IDENTITY: server_fingerprint(identity),
        **{k: _plain(v) for k, v in options.items()},
    }


def _plain(v: Any) -> Any:
    # As the manifest will read back: tuples become lists, paths strings.
    return json.loads(json.dumps(v, default=str))


def recorded_defines(manifest: Mapping[str, Any]) -> dict[str, JsonValue]:
    """The `defines` a manifest recorded, or for an older run the server URL and model it names."""
    if isinstance(manifest.get("defines"), dict):
        return dict(manifest["defines"])
    out: dict[str, JsonValue] = {}
    for name, keys in _LEGACY.items():
        v: Any = manifest
        for k in keys:
            v = v.get(k) if isinstance(v, dict) else None
        if v is not None:  # what an old manifest did not say is not compared
            out[name] = v.rstrip("/") if isinstance(v, str) else v
    return out


def first_difference(old: Mapping[str, Any], new: Mapping[str, Any], server_moved: bool = False) -> Difference | None:
    """The first field of `new` that `old` records with another value (server identity: only where both know;
    `server_moved`: the same server restarted at another URL, its URL not compared)."""
    for field, value in new.items():
        if field not in old or (server_moved and field == URL):
            continue
        if field == IDENTITY:
            was = old[field] or {}
            for k, v in (value or {}).items():
                if v is not None and was.get(k) is not None and was[k] != v:
                    return Difference(f"the server's {k}", was[k], v)
        elif old[field] != value:
            return Difference(field, old[field], value)
    return None
