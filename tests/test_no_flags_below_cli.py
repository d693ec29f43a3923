"""Below the CLI nothing reads the command line's flags: a command turns them into a `Target`, `RunDirOptions` and
its measurement's plan once (evalkit/commands/target_flags.py), and the core takes those (issue #41)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The command line itself, and the modules that are their own `python -m` entry point (each parses its own flags).
CLI = ("evalkit/cli.py", "evalkit/commands/")
ENTRY_POINTS = {"evalkit/sim/command.py", "evalkit/realserver/__main__.py", "evals/select_set.py"}


def _core_modules() -> list[Path]:
    files = [p for d in ("evalkit", "evals", "stress") for p in (ROOT / d).rglob("*.py")]
    return [p for p in files if not str(p.relative_to(ROOT)).startswith(CLI)]


def test_no_module_below_the_cli_reads_a_namespace_of_flags() -> None:
    reads = re.compile(r"getattr\(\s*args\b|\bargs\.[a-z_]+\b(?!\()|argparse\.Namespace")
    found = []
    for path in _core_modules():
        rel = str(path.relative_to(ROOT))
        if rel in ENTRY_POINTS:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if reads.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_entry_points_read_flags_only_where_they_parse_them() -> None:
    # The sim's command builds its settings from a plain mapping of the flags given (settings_from_flags).
    text = (ROOT / "evalkit/sim/command.py").read_text(encoding="utf-8")
    assert "getattr(args" not in text
    assert "def settings_from_flags(profile: str | None, given: Mapping[str, Any])" in text
