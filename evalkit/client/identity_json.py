"""A manifest's `server_identity` as evalkit writes it: what each identity endpoint answered, and the server type it
implies (built by `evalkit.evidence.server_identity.identify`; read by the field-support cache, the check's server
kind and a run's definition). Here, below the evidence, so the client's cache can take it.

Every value the server sent is kept as the JSON it sent (`JsonValue`): a number stays a number.
"""

from __future__ import annotations

from typing import Required, TypedDict

from pydantic import JsonValue


class PropsIdentity(TypedDict):
    """What the identity keeps of llama.cpp's `GET /props`, in the order written."""

    build_info: JsonValue
    total_slots: JsonValue
    n_ctx: JsonValue
    model_path: JsonValue
    modalities: JsonValue


class OpenApiIdentity(TypedDict):
    """A FastAPI server's `/openapi.json` title and the routes that tell servers apart."""

    title: JsonValue
    paths: list[str]


class ServerIdentity(TypedDict, total=False):
    """`server_identity`: `server_type` and `probed` (endpoint -> how it answered) always; the rest as answered.

    `server_info` is SGLang's identifying server arguments, `models` each /v1/models entry's id and extra keys,
    `launch_options` the sim's launch options (`/sim/config`)."""

    server_type: Required[str | None]
    probed: Required[dict[str, str]]
    props: PropsIdentity
    version: JsonValue
    server_info: dict[str, JsonValue]
    models: list[dict[str, JsonValue]]
    owned_by: list[str]
    launch_options: dict[str, JsonValue]
    openapi: OpenApiIdentity
