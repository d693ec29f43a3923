"""Rendering one dataset item into the chat messages evalkit sends, from the Jinja templates under `prompts/`."""

from __future__ import annotations

import ast
import hashlib
from importlib.resources import files
from typing import Any

import jinja2

from evalkit_evals.datasets import DatasetItem

# The sim recognises a question by the verbatim, stripped dataset field (docs/conventions.md), so templates
# insert fields unescaped and unchanged; autoescape stays off and no filter touches them.
_ENV = jinja2.Environment(autoescape=False, keep_trailing_newline=False, undefined=jinja2.StrictUndefined)


def musr_choices(row: dict[str, Any]) -> list[str]:
    """MuSR's `choices` column is a Python list literal in a string."""
    value = row["choices"]
    return list(ast.literal_eval(value)) if isinstance(value, str) else list(value)


def template_source(dataset: str) -> str:
    """The template text for one dataset."""
    return (files("evalkit_prompts") / f"{dataset}.j2").read_text(encoding="utf-8")


def render_prompt(item: DatasetItem) -> str:
    """The user message for one item."""
    row = item.row
    fields: dict[str, Any] = {}
    if item.dataset == "gsm8k":
        fields = {"question": row["question"].strip()}
    elif item.dataset == "math500":
        fields = {"problem": row["problem"].strip()}
    elif item.dataset == "musr":
        fields = {"narrative": row["narrative"].strip(), "question": row["question"].strip(),
                  "choices": musr_choices(row)}
    elif item.dataset == "humanevalplus":
        fields = {"prompt": row["prompt"].strip()}
    return _ENV.from_string(template_source(item.dataset)).render(**fields).strip() + "\n"


def build_messages(prompt: str, system_prompt: str | None) -> list[dict[str, str]]:
    """Chat messages: an optional system message (a thinking switch such as `/no_think`), then the prompt."""
    msgs = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return msgs + [{"role": "user", "content": prompt}]


def template_hashes(datasets: list[str]) -> dict[str, str]:
    """sha256 of each dataset's prompt template, recorded in the manifest so a changed prompt is seen."""
    return {ds: hashlib.sha256(template_source(ds).encode("utf-8")).hexdigest() for ds in datasets}
