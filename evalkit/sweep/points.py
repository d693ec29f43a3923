"""The sweep's points: the grid's product, crossed with the named points (whose parameters go together), and
each point's command lines with the placeholders filled."""

from __future__ import annotations

import itertools
import re
import shlex
import string
from collections.abc import Mapping
from dataclasses import dataclass, field

from evalkit.errors import UsageError
from evalkit.sweep.sweep_file import NamedPoint, Scalar, SweepFile

_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


@dataclass(frozen=True)
class Point:
    """One launch configuration: its name and its parameters as text (what the templates receive)."""

    name: str
    params: dict[str, str]
    resources: dict[str, float] = field(default_factory=dict)  # what its Ray task needs (`sweep --ray`)


def text(value: Scalar) -> str:
    """A parameter as the command line gets it (`true`/`false` for booleans, as TOML writes them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _part(key: str, value: Scalar) -> str:
    shown = _UNSAFE.sub("_", text(value)).strip("-_.") or "none"
    return f"{key}{shown}"


def expand(sweep: SweepFile) -> list[Point]:
    """Every point in sweep order: each named point with each grid combination (`NAME-KEYVALUE-...`); only a grid
    gives `KEYVALUE-...` names; neither gives one point named `default`."""
    keys = list(sweep.grid)
    combos = [dict(zip(keys, values)) for values in itertools.product(*(sweep.grid[k] for k in keys))] if keys else []
    if not sweep.point and not combos:
        return [Point("default", {}, dict(sweep.resources))]
    named: list[NamedPoint | None] = list(sweep.point) or [None]
    out: list[Point] = []
    for p in named:
        for combo in combos or [{}]:
            if p is not None:
                clash = sorted(set(p.params) & set(combo))
                if clash:
                    raise UsageError(f"point {p.name!r} sets {', '.join(clash)}, which the grid also varies")
            parts = ([p.name] if p is not None else []) + [_part(k, v) for k, v in combo.items()]
            own = {k: text(v) for k, v in p.params.items()} if p is not None else {}
            params = {**{k: text(v) for k, v in combo.items()}, **own}
            res = p.resources if p is not None and p.resources is not None else sweep.resources
            out.append(Point("-".join(parts)[:128], params, dict(res)))
    names = [p.name for p in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"two points would share the name {twice[0]!r}: rename a [[point]]")
    return out


def _fields(template: str) -> list[str]:
    try:
        return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as e:
        raise UsageError(f"template {template!r}: {e} (write a literal brace as {{{{ or }}}})") from None


def fill(template: str, values: Mapping[str, str], where: str) -> str:
    """One template with its `{placeholders}` filled; an unknown one is a usage error naming it."""
    for f in _fields(template):
        if f not in values:
            known = ", ".join(sorted(values))
            raise UsageError(f"{where}: unknown placeholder {{{f}}} in {template!r} (known: {known})")
    return template.format_map(dict(values))


def command_line(template: str | list[str], values: Mapping[str, str], where: str) -> list[str]:
    """A command as argv: a string template is split as a shell would after filling (a value of several words gives
    several arguments, an empty one none); a list keeps one argument per element and drops those that fill empty."""
    if isinstance(template, str):
        try:
            return shlex.split(fill(template, values, where))
        except ValueError as e:
            raise UsageError(f"{where}: cannot split {template!r}: {e}") from None
    return [a for a in (fill(t, values, where) for t in template) if a != ""]


def point_values(
    sweep: SweepFile, point: Point, overrides: Mapping[str, str], builtins: Mapping[str, str]
) -> dict[str, str]:
    """What a point's templates may name: the file's vars, `--set` overrides, the point's parameters, the builtins."""
    return {**{k: text(v) for k, v in sweep.vars.items()}, **overrides, **point.params, **builtins}
