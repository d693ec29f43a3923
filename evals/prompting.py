"""Rendering one dataset item into the chat messages evalkit sends, from its eval's Jinja template."""

from __future__ import annotations

import hashlib
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from evalkit_evals import registry
from evalkit_evals.datasets import DatasetItem

_MAX_REPEAT = 1 << 20  # the longest string or list a template's `*` may make; `**` exponents up to 4096


class TemplateSandbox(SandboxedEnvironment):
    """Jinja's sandbox (no attribute starting with `_`, no unsafe callables: a user eval file's template is data,
    never code), whose `*` and `**` also refuse results that would take the host's memory."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        """`left <operator> right`, refused (SecurityError) when the result would be huge."""
        if operator == "**" and isinstance(right, int) and abs(right) > 4096:
            raise jinja2.exceptions.SecurityError(f"the exponent {right} is too large")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > _MAX_REPEAT:
                    raise jinja2.exceptions.SecurityError(f"a repetition longer than {_MAX_REPEAT} is refused")
        return super().call_binop(context, operator, left, right)


def template_environment() -> jinja2.Environment:
    """The environment every eval prompt renders in (user files included): sandboxed, fields inserted as they are."""
    # The sim recognises a question by the verbatim, stripped dataset field (docs/conventions.md), so templates
    # insert fields unescaped and unchanged; autoescape stays off and no filter touches them.
    return TemplateSandbox(autoescape=False, keep_trailing_newline=False, undefined=jinja2.StrictUndefined)


_ENV = template_environment()


def template_source(dataset: str) -> str:
    """The template text for one dataset."""
    return registry.get(dataset).template()


def render_template(source: str, fields: dict[str, object]) -> str:
    """A template rendered with these fields, stripped, ending in one newline."""
    return _ENV.from_string(source).render(**fields).strip() + "\n"


def render_prompt(item: DatasetItem) -> str:
    """The user message for one item."""
    ev = registry.get(item.dataset)
    return render_template(ev.template(), ev.prompt_fields(item.row))


def build_messages(prompt: str, system_prompt: str | None) -> list[dict[str, str]]:
    """Chat messages: an optional system message (a thinking switch such as `/no_think`), then the prompt."""
    msgs = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return msgs + [{"role": "user", "content": prompt}]


def template_hashes(datasets: list[str]) -> dict[str, str]:
    """sha256 of each dataset's prompt template, recorded in the manifest so a changed prompt is seen."""
    return {ds: hashlib.sha256(template_source(ds).encode("utf-8")).hexdigest() for ds in datasets}
