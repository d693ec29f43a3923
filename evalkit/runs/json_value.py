"""The type of a JSON value as `json.loads` gives it back: what a run file holds where its shape is open (a run's
`defines`, a manifest's or a summary's keys a command adds, a JSONL line before its reader types it)."""

from __future__ import annotations

from typing import Union

# A recursive alias: a JSON document is null, a boolean, a number, a string, an array or an object of these.
JsonValue = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]  # noqa: UP007  # a
# runtime alias: its forward references need Union
