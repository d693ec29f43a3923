"""Turning a server profile into a ready client: reachability check and model discovery."""

from __future__ import annotations

import dataclasses
from typing import Any

import openai

from evalkit.client import ChatClient
from evalkit.client_procs import MultiProcessChatClient
from evalkit.clock import Clock
from evalkit.config import ServerProfile, api_key
from evalkit.errors import ServerRefused, UsageError
from evalkit.preflight import quick_check
from evalkit.server_identity import identify


async def discover_model(profile: ServerProfile, timeout_s: float = 10.0) -> str:
    """The profile's model, else the first id `GET /v1/models` lists; unreachable servers are usage errors."""
    async with openai.AsyncOpenAI(
        base_url=profile.base_url, api_key=api_key(profile) or "EMPTY", max_retries=0, timeout=timeout_s
    ) as oai:
        try:
            page = await oai.models.list()
        except openai.APIStatusError as e:
            raise UsageError(f"server at {profile.base_url} answered GET /models with HTTP {e.status_code}") from None
        except openai.APIError as e:
            raise UsageError(f"cannot reach server at {profile.base_url}: {type(e).__name__}: {e}") from None
    if profile.model:
        return profile.model
    if not page.data:
        raise UsageError(f"server at {profile.base_url} lists no model; pass --model")
    return page.data[0].id


async def open_client(profile: ServerProfile, clock: Clock | None = None,
                      client_procs: int = 1) -> tuple[ChatClient, ServerProfile]:
    """A client for the profile's server, and the profile with its model filled in.

    The preflight's essential probe runs first: a server that refuses evalkit's request stops the command here
    (exit 1, in the server's words) instead of after a thousand failed requests; one that wants UUID request ids
    gets them, and fields the server refuses (evalkit.field_support) are never sent.
    """
    model = await discover_model(profile)
    profile = dataclasses.replace(profile, model=model)
    key = api_key(profile)
    # Who the server is keys the field-support cache (and the manifest's server_identity).
    identity = await identify(profile.base_url or "", {"Authorization": f"Bearer {key}"} if key else None)
    check = await quick_check(profile.base_url or "", model, key, dict(profile.extra_body), identity=identity)
    refused = [r for r in check.rows if r.supported is False]
    if refused:
        raise ServerRefused(f"server at {profile.base_url} refuses evalkit's requests: {refused[0].detail}"
                            + (f"; {refused[0].fix}" if refused[0].fix else "") + " (evalkit check shows more)")
    if client_procs > 1:  # the streams are read in worker processes; the records come back whole
        client: Any = MultiProcessChatClient(profile.base_url or "", model, client_procs, api_key=key,
                                             clock=clock, uuid_request_ids=check.uuid_request_ids,
                                             omit_fields=check.omit_fields)
    else:
        client = ChatClient(profile.base_url or "", model, api_key=key, clock=clock,
                            uuid_request_ids=check.uuid_request_ids, omit_fields=check.omit_fields)
    client.preflight = check
    client.identity = identity
    return client, profile
