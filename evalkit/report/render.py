"""Rendering a report context through a Jinja template: the packaged one or a user's own file."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from evalkit.errors import UsageError

DEFAULT_TEMPLATE = "report.md.j2"


# report.md shows what runs hold (labels, models, answers, a server's words) as text, never as markup of its own
# (issue #56): a tag's `<` is written `&lt;` (no <script>, no onerror=), and a line break inside a value is a space
# (a label with newlines wrote its own heading and table row). report.html escapes on its own (html.py).
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_BREAKS = re.compile(r"[\r\n\v\f\x85\u2028\u2029]+")


def md_text(value: str) -> str:
    """One value as inline markdown text: no HTML tag of its own, no line break."""
    return _BREAKS.sub(" ", _TAG_START.sub("&lt;", value))


def md_safe(value: Any, depth: int = 0) -> Any:
    """A copy of a report context with every string made `md_text` (dicts, lists, tuples and dataclasses walked;
    numbers and the rest as they are)."""
    if isinstance(value, str):
        return md_text(value)
    if depth > 64:
        return value
    if isinstance(value, dict):
        return {k: md_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(md_safe(v, depth + 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: md_safe(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value


def _md_cell(value: Any) -> str:
    # A pipe inside a cell would split the markdown table.
    return str(value).replace("|", "\\|").replace("\n", "<br>")


def environment(template_dir: Path | None = None) -> jinja2.Environment:
    """A Jinja environment that finds a user's template directory first, then the packaged templates."""
    packaged = files("evalkit_report_templates")

    def load_packaged(name: str) -> str | None:
        res = packaged / name
        return res.read_text(encoding="utf-8") if res.is_file() else None

    loaders: list[jinja2.BaseLoader] = []
    if template_dir is not None:
        loaders.append(jinja2.FileSystemLoader(str(template_dir)))
    loaders.append(jinja2.FunctionLoader(load_packaged))
    # Sandboxed: a user's template is data (no attribute starting with `_`, no unsafe call reaches Python).
    env = SandboxedEnvironment(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md_cell"] = _md_cell
    return env


def render(context: Mapping[str, object], template: Path | None = None) -> str:
    """Render the report; a user template may `{% import "tables.md.j2" as t %}` to reuse the table macro."""
    context = md_safe(dict(context))
    try:
        if template is None:
            return environment().get_template(DEFAULT_TEMPLATE).render(**context)
        if not template.is_file():
            raise UsageError(f"template not found: {template}")
        return environment(template.parent).get_template(template.name).render(**context)
    except jinja2.TemplateError as e:
        raise UsageError(f"template error: {type(e).__name__}: {e}") from None
