"""MuSR team allocations read in any order: "Exhibit Cleaner: Olivia and Mia, Animal Caretaker: Alex" and
"Alex as Animal Caretaker; Mia and Olivia as Exhibit Cleaners" both name the choice
"Animal Caretaker: Alex, Exhibit Cleaner: Mia and Olivia"."""

from __future__ import annotations

import re

_CHOICE = re.compile(r"^\s*([^:,]+?)\s*:\s*(.+?)\s*,\s*([^:,]+?)\s*:\s*(.+?)\s*$")
Assignment = dict[str, frozenset[str]]


def parse_choice(choice: str) -> Assignment | None:
    """A choice's roles and the names given each (`{"animal caretaker": {"alex"}, ...}`), or None."""
    m = _CHOICE.match(choice)
    if not m:
        return None
    out = {}
    for role, names in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
        out[role.lower()] = frozenset(n.strip().lower() for n in re.split(r",|\band\b", names) if n.strip())
    return out


def _mentions(text: str, words: list[str], plural: bool) -> list[tuple[int, str]]:
    low = text.lower()
    found = []
    for w in words:
        tail = r"(?:s|es)?" if plural else ""
        found += [(m.start(), w) for m in re.finditer(r"(?<!\w)" + re.escape(w) + tail + r"(?!\w)", low)]
    return sorted(found)


def _assign(roles: list[tuple[int, str]], names: list[tuple[int, str]], forward: bool) -> Assignment | None:
    got: dict[str, set[str]] = {}
    for pos, name in names:
        near = [r for r in roles if (r[0] < pos if forward else r[0] > pos)]
        if not near:
            return None
        role = near[-1][1] if forward else near[0][1]
        got.setdefault(role, set()).add(name)
    return {r: frozenset(n) for r, n in got.items()}


def match(text: str, choices: list[str]) -> int | None:
    """The 1-based choice whose allocation the text states (roles and names in any order), or None when the
    choices are no team allocations or the text does not state exactly one of them."""
    parsed = [parse_choice(c) for c in choices]
    if not parsed or any(p is None for p in parsed):
        return None
    roles = sorted({r for p in parsed if p for r in p})
    people = sorted({n for p in parsed if p for ns in p.values() for n in ns})
    role_at, name_at = _mentions(text, roles, True), _mentions(text, people, False)
    if not role_at or not name_at:
        return None
    found = set()
    for forward in (True, False):
        said = _assign(role_at, name_at, forward)
        found |= {i for i, p in enumerate(parsed, 1) if said is not None and said == p}
    return found.pop() if len(found) == 1 else None
