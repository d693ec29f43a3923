"""Rendering one dataset item into the chat messages evalkit sends, from its eval's Jinja template."""

from __future__ import annotations

import hashlib

import jinja2

from evalkit_evals import registry, template_budget
from evalkit_evals.datasets import DatasetItem


def template_environment() -> jinja2.Environment:
    """The environment every eval prompt renders in (user files included): sandboxed, fields inserted as they are,
    and its arithmetic bounded (`template_budget.py`)."""
    # The sim recognises a question by the verbatim, stripped dataset field (docs/conventions.md), so templates
    # insert fields unescaped and unchanged; autoescape stays off and no filter touches them.
    return template_budget.environment()


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
