"""The budget of a user-supplied template (issue #56): a user eval's prompt and `[sim] answer` are rendered once per
row before the run, all of them in one child process that holds the budget, so no template takes the host's time
or memory and every failure is one line naming the row.

The budget (docs/conventions.md, "Bounds"): each render at most `RENDER_CPU_S` of CPU and `RENDER_CHARS`
characters of text; the child at most `MEMORY_BYTES` of address space and `WALL_S_PER_RENDER` of wall clock a
render. Jinja's sandbox (`TemplateSandbox`) refuses the known escapes and, in-process as well, the arithmetic that
makes a huge value at once (`*` past `RENDER_CHARS`, `**` past `MAX_INT_BITS`). A render that passes here renders
the same way in-process later (the run's prompts, the sim's answers), within the same bounds.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

RENDER_CHARS = 1 << 20  # the longest text (and `*` repetition) a template may make
MAX_INT_BITS = 1 << 16  # the largest integer `**` and `*` may make (about 19,700 digits)
RENDER_CPU_S = 2  # CPU seconds a render may take
MEMORY_BYTES = 1 << 30  # the child's address space: every render together
WALL_S_PER_RENDER = 5.0  # the child's wall clock: this a render, and 20 s to start


class TemplateSandbox(SandboxedEnvironment):
    """Jinja's sandbox (no attribute starting with `_`, no unsafe callables: a user eval file's template is data,
    never code), whose `*` and `**` also refuse results that would take the host's memory or time at once."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        """`left <operator> right`, refused (SecurityError) when the result would be huge."""
        ints = type(left) is int and type(right) is int
        if operator == "**" and isinstance(right, int) and abs(right) > 4096:
            raise jinja2.exceptions.SecurityError(f"the exponent {right} is too large")
        if operator == "**" and ints and right > 0 and abs(left).bit_length() * right > MAX_INT_BITS:
            raise jinja2.exceptions.SecurityError(f"a power of more than {MAX_INT_BITS} bits is refused")
        if operator == "*":
            if ints and abs(left).bit_length() + abs(right).bit_length() > MAX_INT_BITS:
                raise jinja2.exceptions.SecurityError(f"a product of more than {MAX_INT_BITS} bits is refused")
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > RENDER_CHARS:
                    raise jinja2.exceptions.SecurityError(f"a repetition longer than {RENDER_CHARS} is refused")
        return super().call_binop(context, operator, left, right)


def environment() -> jinja2.Environment:
    """The sandboxed environment every eval prompt renders in: fields inserted as they are (autoescape off)."""
    return TemplateSandbox(autoescape=False, keep_trailing_newline=False, undefined=jinja2.StrictUndefined)


def describe(e: BaseException) -> str:
    """One line for a render's failure."""
    if isinstance(e, jinja2.UndefinedError):
        return str(e.message)
    if isinstance(e, MemoryError):
        return f"exceeds the template budget ({MEMORY_BYTES >> 20} MB of memory)"
    if isinstance(e, RecursionError):
        return "exceeds the template budget (recursion too deep)"
    text = " ".join(str(e).split())[:200]
    if isinstance(e, jinja2.TemplateError):
        return text
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def check_renders(renders: list[tuple[str, dict[str, Any]]]) -> tuple[int, str] | None:
    """Render each (source, fields) in the budgeted child; None when all pass, else (index, why) of the first
    that did not."""
    if not renders:
        return None
    with tempfile.TemporaryFile() as data:
        pickle.dump(renders, data)  # evalkit's own rows for evalkit's own child: never read from anyone else
        data.seek(0)
        wall = 20.0 + WALL_S_PER_RENDER * len(renders)
        proc = subprocess.Popen(
            [sys.executable, "-c", "from evalkit_evals.template_budget import _child; _child()"],
            stdin=data,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=wall)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            done = out.count(b"\n")
            return done, f"exceeds the template budget ({WALL_S_PER_RENDER:g} s a render)"
    lines = out.splitlines()
    for n, line in enumerate(lines):
        msg = json.loads(line)
        if msg is not True:
            return n, str(msg)
    if len(lines) < len(renders):
        why = f"{RENDER_CPU_S} s of CPU" if proc.returncode == -24 else f"{MEMORY_BYTES >> 20} MB of memory"
        return len(lines), f"exceeds the template budget ({why})"
    return None


def _child() -> None:
    renders = pickle.load(sys.stdin.buffer)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.setrecursionlimit(400)  # a recursive macro ends as RecursionError long before the C stack
    env = environment()
    out = os.fdopen(1, "w", encoding="utf-8")
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    for source, fields in renders:
        used = time.process_time()
        soft = int(used) + 1 + RENDER_CPU_S  # SIGXCPU ends the child: the parent names the render
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard if hard == resource.RLIM_INFINITY else max(soft, hard)))
        try:
            text = env.from_string(source).render(**fields)
            ok: Any = True if len(text) <= RENDER_CHARS else f"exceeds the template budget ({RENDER_CHARS} characters)"
            if time.process_time() - used > RENDER_CPU_S:
                ok = f"exceeds the template budget ({RENDER_CPU_S} s of CPU)"
        except BaseException as e:  # noqa: BLE001 - the template's failure is data, told in one line
            ok = describe(e)
        out.write(json.dumps(ok) + "\n")
        out.flush()
