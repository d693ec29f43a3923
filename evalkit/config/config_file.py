"""The schema of `evalkit.toml` (named server profiles), a user-written file: an unknown key is an error. Read by
evalkit.config.profiles; its JSON Schema is published in docs/schemas/evalkit-toml.schema.json."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from evalkit.runs.schemas import ClosedModel

THINKING_STYLES = ("auto", "reasoning_effort", "chat_template_kwargs", "system_prompt", "none")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ServerProfileTable(ClosedModel):
    """One `[servers.NAME]` table of `evalkit.toml`."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    thinking: Literal[THINKING_STYLES] = "auto"  # type: ignore[valid-type]  # as above
    thinking_on_prompt: str = "/think"
    thinking_off_prompt: str = "/no_think"
    concurrency: int | None = Field(default=None, ge=1, le=4096)
    extra_body: dict[str, Any] = {}
    build: dict[str, Any] = {}
    log_patterns: dict[str, str] = {}

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if not _ENV_NAME.match(v):
            raise ValueError("must be the name of an environment variable (letters, digits, _), not a key")
        return v

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^\s/]+", v):
            raise ValueError("must be an http:// or https:// URL")
        return v


class ConfigFile(ClosedModel):
    """`evalkit.toml`: named server profiles."""

    servers: dict[str, ServerProfileTable] = {}
