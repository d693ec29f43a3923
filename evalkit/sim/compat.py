"""Refusals real servers make, switched on by sim flags so `evalkit check` and the client can be tested on them.

- `uuid_request_ids`: llama-cpp-python's request-id middleware (starlette-context) answers a bare HTTP 400,
  empty body, to an `X-Request-Id` that is not a UUID.
- `reject_fields`: an OpenAI-style server that refuses body fields it does not know, naming the field.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from evalkit.sim.settings import SimSettings


def refusal(s: SimSettings, request_id: str | None, body: Any) -> tuple[int, str] | None:
    """(status, body text) when the emulated server would refuse this request before serving it, else None."""
    if s.uuid_request_ids and request_id is not None:
        try:
            uuid.UUID(request_id)
        except ValueError:
            return 400, ""
    if s.reject_fields and isinstance(body, dict):
        for name in s.reject_fields:
            if name in body:
                return 400, json.dumps({"error": {"message": f"Unrecognized request argument supplied: {name}",
                                                  "type": "invalid_request_error", "param": name, "code": None}})
    return None
