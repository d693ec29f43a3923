"""The type of a JSON value as `json.loads` gives it back: what a run file holds where its shape is open (a run's
`defines`, a request's labels and the server's own timings, a JSONL line before its reader types it)."""

from __future__ import annotations

from typing import Union

# A recursive alias: a JSON document is null, a boolean, a number, a string, an array or an object of these. The same
# type as pydantic.JsonValue (which the run-file models use as a field type), without importing pydantic. Written
# with Union: the alias is evaluated at run time, and `|` does not take its forward references.
JsonValue = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]  # noqa: UP007
