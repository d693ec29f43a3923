"""Turning a server profile into a ready client: reachability check and model discovery."""

from __future__ import annotations

import dataclasses

import openai

from evalkit.client import ChatClient
from evalkit.clock import Clock
from evalkit.config import ServerProfile, api_key
from evalkit.errors import UsageError


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


async def open_client(profile: ServerProfile, clock: Clock | None = None) -> tuple[ChatClient, ServerProfile]:
    """A client for the profile's server, and the profile with its model filled in."""
    model = await discover_model(profile)
    profile = dataclasses.replace(profile, model=model)
    return ChatClient(profile.base_url or "", model, api_key=api_key(profile), clock=clock), profile
