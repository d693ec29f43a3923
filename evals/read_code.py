"""Code readers (HumanEval+), issue #55: which code an answer offers as its solution. The fenced block that defines
the entry point (the one graded, `humanevalplus.extract_code`'s choice) and the last complete solution (the last
fenced block that defines the entry point and compiles) are both markers and must be one block; code with no fence
that defines the entry point or completes the prompt is a plain reading; the longest fenced block when none defines
the entry point is a fallback. Readings compare by the block's text."""

from __future__ import annotations

import hashlib
import re

from evalkit_evals import humanevalplus
from evalkit_evals.sureness import Found, Strength

_PY = ("", "python", "py", "python3")


def _key(block: str) -> str:
    return hashlib.sha256(block.strip().encode()).hexdigest()[:12]


def _compiles(block: str) -> bool:
    try:
        compile(block, "<answer>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def readings(answer: str, prompt: str, entry_point: str) -> tuple[list[Found], str | None]:
    """Every code reader's reading, and the key of the block `extract_code` grades (None when none)."""
    defines = re.compile(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", re.MULTILINE)
    blocks = [(m.end(), m.group(2)) for m in humanevalplus._FENCE.finditer(answer) if m.group(1).lower() in _PY]
    solutions = [(at, b) for at, b in blocks if defines.search(b) and not humanevalplus.is_test_block(b, entry_point)]
    out: list[Found] = []
    graded: str | None = None
    with_def = [(at, b) for at, b in blocks if defines.search(b)]
    if with_def:
        at, block = with_def[-1]
        graded = _key(block)
        out.append(Found("code.entry_block", Strength.MARKER, f"block ending at {at}", graded, None, at))
        complete = [(at, b) for at, b in solutions if _compiles(b)]
        if complete:
            at, block = complete[-1]
            out.append(Found("code.last_complete", Strength.MARKER, f"block ending at {at}", _key(block), None, at))
    elif blocks:
        at, block = max(blocks, key=lambda ab: len(ab[1]))
        graded = _key(block)
        out.append(Found("code.longest_fence", Strength.FALLBACK, f"block ending at {at}", graded, None, at))
    elif answer.strip() and (defines.search(answer) or humanevalplus._is_body(prompt, answer)):
        graded = _key(answer)
        out.append(Found("code.bare", Strength.PLAIN, "the whole answer", graded, None, len(answer)))
    return out, graded
