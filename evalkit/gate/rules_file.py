"""The schema of a gate rules file (CONTRACT.md "Gate rules"), a user-written file: an unknown key is an error. Read
by evalkit.gate; its JSON Schema is published in docs/schemas/gate-rules.schema.json."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from evalkit.runs.schemas import ClosedModel, finite


class GateRule(ClosedModel):
    """One `[[rule]]` of a gate rules file: a metric, a comparison and exactly one way to set the limit."""

    metric: str = Field(pattern=r"^[a-z_]+\.[^.\s]+(\.[^.\s]+)*$")
    op: Literal["<", "<=", ">", ">=", "==", "!="]
    value: float | None = None
    relative: float | None = None
    offset: float | None = None
    name: str | None = None
    description: str | None = None

    model_config = ConfigDict(extra="forbid", strict=False)

    @model_validator(mode="before")
    @classmethod
    def _yes_no(cls, data: Any) -> Any:
        # `value = true` asks a yes/no of the summary (`stress.until_sure.decided`), read as 1 or 0: only == or !=.
        if isinstance(data, dict) and isinstance(data.get("value"), bool):
            if data.get("op") not in ("==", "!="):
                raise ValueError("value true or false compares only with op == or !=")
            return {**data, "value": float(data["value"])}
        return data

    @field_validator("value", "relative", "offset", mode="before")
    @classmethod
    def _number(cls, v: Any) -> Any:
        if isinstance(v, bool) or (v is not None and not isinstance(v, (int, float))):
            raise ValueError("must be a number")
        return v

    @field_validator("value", "relative", "offset")
    @classmethod
    def _finite_limit(cls, v: float | None) -> float | None:
        return finite(v)

    @field_validator("relative")
    @classmethod
    def _positive(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            raise ValueError("must be above 0 (a fraction of the baseline, e.g. 0.97)")
        return v

    @model_validator(mode="after")
    def _one_limit(self) -> GateRule:
        given = [k for k in ("value", "relative", "offset") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of value, relative, offset")
        return self


class GateRules(ClosedModel):
    """A gate rules file: a non-empty list of `[[rule]]` tables."""

    rule: list[GateRule] = Field(min_length=1)
