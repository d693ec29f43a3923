"""Turning a server profile into a ready client: reachability check and model discovery."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Any
from urllib.parse import urlsplit

from evalkit.client import auxiliary
from evalkit.client.chat import ChatClient
from evalkit.client.probe import quick_check
from evalkit.client.procs import MultiProcessChatClient
from evalkit.clock import Clock
from evalkit.config.profiles import ServerProfile
from evalkit.errors import ServerRefused, UsageError
from evalkit.evidence.server_identity import identify
from evalkit.redact import excerpt, scrub

_SSL_WORDS = re.compile(r" ssl:(?:default|None|True|False|<[^>]*>)")


def unreachable_words(e: BaseException, key: str | None = None) -> str:
    """Why a server could not be reached, in a few words: the refused connection said as such, aiohttp's
    `ssl:default` (its TLS setting, not a TLS problem) left out of the text."""
    os_error = getattr(e, "os_error", None)
    if isinstance(e, ConnectionRefusedError) or isinstance(os_error, ConnectionRefusedError):
        return "connection refused (nothing listens there: is the server running, on this host and port?)"
    if isinstance(e, asyncio.TimeoutError):
        return "no answer in time (TimeoutError)"
    text = _SSL_WORDS.sub("", scrub(str(e), [key]))
    return f"{type(e).__name__}: {text or 'no answer'}"


def _not_a_model_list(url: str, status: int, ctype: str, body: str, key: str | None, why: str) -> UsageError:
    # What came back, so a proxy's login page or a wrong port's HTML is seen for what it is (scrubbed of secrets).
    shown = excerpt(body, 200, [key]) or "empty body"
    return UsageError(
        f"server at {url} answered GET /models with HTTP {status} ({ctype or 'no content type'}), {why}: {shown}"
    )


async def _model_ids(profile: ServerProfile, timeout_s: float) -> list[str]:
    url = (profile.base_url or "").rstrip("/")
    key = profile.api_key
    headers = {"Authorization": f"Bearer {key or 'EMPTY'}"}
    try:
        async with (
            auxiliary.session(timeout=auxiliary.ClientTimeout(total=timeout_s)) as session,
            session.get(f"{url}/models", headers=headers) as resp,
        ):
            status, ctype = resp.status, resp.headers.get("Content-Type", "")
            body = await auxiliary.read_text(resp)
    except auxiliary.BodyTooLarge as e:
        raise UsageError(f"server at {url} answered GET /models with a {e}") from None
    except (auxiliary.ClientError, asyncio.TimeoutError, OSError, ValueError) as e:
        raise UsageError(f"cannot reach server at {url}: {unreachable_words(e, key)}") from None
    if status != 200:
        why = "not the model list"
        if status == 404 and not urlsplit(url).path.rstrip("/").endswith("/v1"):
            why += f" (hint: an OpenAI-compatible base URL ends in /v1: try --base-url {url}/v1)"
        raise _not_a_model_list(url, status, ctype, body, key, why)
    try:
        data = auxiliary.parse_json(body)
    except ValueError as e:
        why = str(e) if "nested deeper" in str(e) else "not JSON"
        raise _not_a_model_list(url, status, ctype, body, key, why) from None
    models = data.get("data") if isinstance(data, dict) else None
    if not isinstance(models, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in models):
        raise _not_a_model_list(url, status, ctype, body, key, 'not an OpenAI model list ({"data": [{"id": ...}]})')
    return [m["id"] for m in models]


async def discover_model(profile: ServerProfile, timeout_s: float = 10.0) -> str:
    """The profile's model, else the first id `GET /v1/models` lists; unreachable servers are usage errors."""
    ids = await _model_ids(profile, timeout_s)
    if profile.model:
        return profile.model
    if not ids:
        raise UsageError(f"server at {profile.base_url} lists no model; pass --model")
    return ids[0]


PROBE_TIMEOUT_S = 60.0


async def open_client(
    profile: ServerProfile, clock: Clock | None = None, client_procs: int = 1, timeout_s: float | None = None
) -> tuple[ChatClient, ServerProfile]:
    """A client for the profile's server, and the profile with its model filled in.

    The preflight's essential probe runs first: a server that refuses evalkit's request stops the command here
    (exit 1, in the server's words) instead of after a thousand failed requests; one that wants UUID request ids
    gets them, and fields the server refuses (evalkit.client.field_support) are never sent.
    """
    model = await discover_model(profile)
    profile = dataclasses.replace(profile, model=model)
    key = profile.api_key
    # Who the server is keys the field-support cache (and the manifest's server_identity).
    identity = await identify(profile.base_url or "", {"Authorization": f"Bearer {key}"} if key else None)
    # Each probe within the command's --timeout-s (and a minute at most): a stream that never ends is one probe's
    # timeout, not eight of the default's.
    probe_s = min(PROBE_TIMEOUT_S, timeout_s) if timeout_s else PROBE_TIMEOUT_S
    check = await quick_check(
        profile.base_url or "", model, key, dict(profile.extra_body), timeout_s=probe_s, identity=identity
    )
    if check.unreachable is not None:
        raise UsageError(
            f"cannot reach server at {profile.base_url}: it answered GET /models, then no connection for evalkit's "
            f"request ({scrub(check.unreachable, [key])})"
        )
    refused = [r for r in check.rows if r.supported is False]
    if refused:
        said = f"{refused[0].detail}" + (f"; {refused[0].fix}" if refused[0].fix else "")
        raise ServerRefused(
            f"server at {profile.base_url} refuses evalkit's requests: "
            f"{scrub(' '.join(said.split()), [key])} (evalkit check shows more)"
        )
    if client_procs > 1:  # the streams are read in worker processes; the records come back whole
        client: Any = MultiProcessChatClient(
            profile.base_url or "",
            model,
            client_procs,
            api_key=key,
            clock=clock,
            uuid_request_ids=check.uuid_request_ids,
            omit_fields=check.omit_fields,
            standing_body=profile.extra_body,
        )
    else:
        client = ChatClient(
            profile.base_url or "",
            model,
            api_key=key,
            clock=clock,
            uuid_request_ids=check.uuid_request_ids,
            omit_fields=check.omit_fields,
            standing_body=profile.extra_body,
        )
    client.preflight = check
    client.identity = identity
    return client, profile
