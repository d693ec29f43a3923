"""The one list of capability evals. Adding a dataset is one module `evals/<name>.py` defining `EVAL` (see
`protocol.Eval`) plus its name in `BUILTIN`; user evals from TOML files are registered at run time (`register`).

Everything that used to switch on a dataset's name asks here: loading, prompts, grading, the summary, the report's
order, and the sim. Names are known without importing the modules, so the report and the sim stay light.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from evalkit.errors import UsageError
from evalkit_evals.protocol import Eval

BUILTIN: tuple[str, ...] = (
    "gsm8k",
    "math500",
    "musr",
    "humanevalplus",
)

# Each eval reads its own rows' type (`Eval[RowIn]`); held together, an eval is asked about its own items' rows.
_EXTRA: dict[str, Eval[Any]] = {}  # registered at run time: user evals, test fixtures
_LOADED: dict[str, Eval[Any]] = {}


def register(ev: Eval[Any]) -> Eval[Any]:
    """Add an eval for this process (replacing a run-time one of the same name); a built-in's name is a usage
    error."""
    if ev.name in BUILTIN:
        raise UsageError(f"an eval may not be named {ev.name!r}: a built-in dataset has that name")
    _EXTRA[ev.name] = ev
    return ev


def unregister(name: str) -> None:
    """Forget a run-time eval (tests)."""
    _EXTRA.pop(name, None)


def names() -> list[str]:
    """Every registered eval's name: the built-ins in their order, then run-time ones as registered."""
    return [*BUILTIN, *_EXTRA]


def get(name: str) -> Eval[Any]:
    """The eval of this name; an unknown name is a usage error."""
    if name in _EXTRA:
        return _EXTRA[name]
    if name not in BUILTIN:
        raise UsageError(f"unknown dataset {name!r} (known: {', '.join(names())})")
    if name not in _LOADED:
        _LOADED[name] = importlib.import_module(f"evalkit_evals.{name}").EVAL
    return _LOADED[name]


def ordered(found: Iterable[str]) -> list[str]:
    """The names found, registered ones in registry order first, then any others in first-seen order."""
    seen = list(dict.fromkeys(found))
    known = names()
    return [n for n in known if n in seen] + [n for n in seen if n not in known]
