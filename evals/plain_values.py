"""Plain values across the sandbox's wall: only exact builtin types (None, bool, int, float, complex, str, bytes,
list, tuple, dict, set, frozenset) are encoded, as one JSON text with a tag for what JSON cannot say.

Both sides use this module: the sandboxed child to send a candidate's output, the harness to read it back. The
harness never trusts the child's encoder (the candidate can replace it); it trusts only `decode`, which builds
fresh builtins from JSON, so whatever comes back is a plain value without methods of the candidate's making. A
subclass of `int` or `str`, an object whose `__eq__` always says yes, a proxy: none of them is encodable.

Encoding: JSON null/true/false/numbers/strings/arrays stand for themselves (an array is a list); every JSON
object is a tag: {"t": [...]} tuple, {"d": [[k, v], ...]} dict, {"s": [...]} set, {"f": [...]} frozenset,
{"b": "hex"} bytes, {"c": [re, im]} complex, {"i": "hex"} an int too long for JSON's digits.
Standard library only: the child imports it inside the sandbox.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MAX_DEPTH = 64
_BIG_INT = 1 << 4000  # past ~4300 decimal digits Python refuses int <-> str; hex has no such limit
_SCALARS = (type(None), bool, str)
_FLAT_OK = frozenset({int, float, str, bool, type(None)})


class NotPlain(ValueError):
    """A value that is not made of exact builtin types (or is too deep, too large or malformed)."""


def _numpy_scalar(x: Any) -> Any:
    # numpy's own scalar types (np.int64 from a numpy answer) become the builtin they stand for; the exact type
    # is checked, so a subclass of a numpy scalar is as foreign as any other.
    np = sys.modules.get("numpy")
    if np is None:
        raise NotPlain(f"not a plain value: {type(x).__name__}")
    t = type(x)
    if t is np.bool_:
        return bool(x)
    if t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        return int(x)
    if t in (np.float16, np.float32, np.float64):
        return float(x)
    raise NotPlain(f"not a plain value: {type(x).__name__}")


def _enc(x: Any, depth: int) -> Any:
    t = type(x)
    if t in _SCALARS:
        return x
    if t is int:
        return x if -_BIG_INT < x < _BIG_INT else {"i": hex(x)}
    if t is float:
        return x
    if depth >= MAX_DEPTH:
        raise NotPlain("nested too deep")
    if t is list:
        # A flat list of scalars (most outputs) goes to JSON as it is; `map(type, ...)` keeps the check in C.
        kinds = set(map(type, x))
        if kinds <= _FLAT_OK and (int not in kinds or all(-_BIG_INT < v < _BIG_INT for v in x if type(v) is int)):
            return x
        return [_enc(v, depth + 1) for v in x]
    if t is tuple:
        return {"t": [_enc(v, depth + 1) for v in x]}
    if t is dict:
        return {"d": [[_enc(k, depth + 1), _enc(v, depth + 1)] for k, v in dict.items(x)]}
    if t is set:
        return {"s": [_enc(v, depth + 1) for v in x]}
    if t is frozenset:
        return {"f": [_enc(v, depth + 1) for v in x]}
    if t is bytes:
        return {"b": x.hex()}
    if t is complex:
        return {"c": [x.real, x.imag]}
    return _enc(_numpy_scalar(x), depth)


def to_tree(value: Any) -> Any:
    """The JSON tree (before text) that stands for `value`; NotPlain when it is not plain."""
    try:
        return _enc(value, 0)
    except RecursionError:
        raise NotPlain("nested too deep") from None


def encode(value: Any, max_bytes: int) -> str:
    """`value` as one JSON line's text; NotPlain when it is not plain or its text exceeds `max_bytes`."""
    try:
        text = json.dumps(_enc(value, 0), check_circular=False, separators=(",", ":"))
    except RecursionError:
        raise NotPlain("nested too deep") from None
    if len(text) > max_bytes:
        raise NotPlain(f"output larger than {max_bytes} bytes")
    return text


def _dec(x: Any, depth: int) -> Any:
    t = type(x)
    if t is list:
        if depth >= MAX_DEPTH:
            raise NotPlain("nested too deep")
        if set(map(type, x)) <= _FLAT_OK:
            return x
        return [_dec(v, depth + 1) for v in x]
    if t is not dict:
        return x  # json.loads makes only None, bool, int, float, str, list and dict
    if depth >= MAX_DEPTH or len(x) != 1:
        raise NotPlain("malformed value")
    ((tag, v),) = x.items()
    if tag == "i" and type(v) is str:
        return int(v, 16)
    if tag == "b" and type(v) is str:
        return bytes.fromhex(v)
    if tag == "c" and type(v) is list and len(v) == 2 and all(type(p) in (int, float) for p in v):
        return complex(v[0], v[1])
    if type(v) is not list:
        raise NotPlain("malformed value")
    items = [_dec(i, depth + 1) for i in v]
    if tag == "t":
        return tuple(items)
    if tag == "s":
        return set(items)
    if tag == "f":
        return frozenset(items)
    if tag == "d" and all(type(p) is list and len(p) == 2 for p in items):
        return dict(items)
    raise NotPlain("malformed value")


def decode_obj(obj: Any) -> Any:
    """The plain value an already-parsed JSON tree stands for; NotPlain when it is malformed."""
    try:
        return _dec(obj, 0)
    except NotPlain:
        raise
    except (TypeError, ValueError, RecursionError) as e:  # an unhashable key, bad hex, ...
        raise NotPlain(f"malformed value ({type(e).__name__})") from None


def decode(text: str | bytes) -> Any:
    """The plain value a JSON text stands for; NotPlain when it is malformed."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise NotPlain(f"not JSON ({type(e).__name__})") from None
    return decode_obj(obj)
