"""Which optional request fields a server accepts, ignores or refuses, learned by sending each one (issue 33).

evalkit may send fields beyond a bare chat request: `stream_options`, `ignore_eos`, `min_tokens`, `seed`,
`reasoning_effort`, `chat_template_kwargs`, the `X-Request-Id` header and a profile's extra body. Strict servers
(pydantic request models with `extra="forbid"`, as `transformers serve`) answer HTTP 422 to a request carrying one
they do not know, so every request of a command would fail. Each field is sent alone on a bare request:
- refused: the server answered 4xx; the client then never sends it (`FieldSupport.refused`);
- ignored: taken, but the effect that can be checked did not happen (`ignore_eos` stopped early, no usage chunk);
- accepted: taken, and its effect seen where one can be checked (`checked`), else only not refused.
A forced length (`ignore_eos`, `min_tokens`) is judged against where the model stops on its own: a bare "Reply with
just: OK" with room for 64 tokens, then the field at two lengths past that stop (issue 40: a fixed 8-token probe
could not tell when a small model talked past 8 tokens either way). Honoured: both ran to their length. Ignored:
it stopped early despite the field. A model that does not stop within 64 tokens on its own leaves the effect not
shown ("sent; its effect could not be observed with this model"), never read as ignored.

A command's output length is then in one of three states (`length_state`, issue 57), each said in its own words:
- forced: ignore_eos (else min_tokens) sent, and the probe saw it work (`length_forced` true);
- sent, not observable: ignore_eos sent, taken, and its effect could not be observed with this model (it ran to its
  cap without it too: a model that never stops early), so the run cannot tell whether it forced anything
  (`length_forced` null); never called "not forced";
- not forced: nothing sent (`--no-ignore-eos`, refused), or the probe saw it stop early despite it (`length_forced`
  false).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

ACCEPTED, IGNORED, REFUSED, UNKNOWN = "accepted", "ignored", "refused", "can't tell"
HEADER = "header:X-Request-Id"
OPTIONAL_FIELDS = ("stream_options", "ignore_eos", "min_tokens", "seed", "reasoning_effort", "chat_template_kwargs")
PROBE_QUESTION = "What is 17 + 25? Reply with only the number."
PROBE_TOKENS = 8  # the bare request's room (the header and the other fields need no more)
LENGTH_PROMPT = "Reply with just: OK"  # a reply any chat model ends early on its own
LENGTH_ROOM = 64  # the bare reply's cap: a model that has not stopped by then shows no forced length
LENGTH_FIELDS = ("ignore_eos", "min_tokens")
NOT_SHOWN = "sent; its effect could not be observed with this model"
OLD_NOT_SHOWN = "taken, effect not shown"  # the same verdict, as releases before issue 57 worded it
# The three states of a command's output length (`length_state`).
FORCED, UNOBSERVED, NOT_FORCED = "forced", "sent_not_observable", "not_forced"

# What each field is sent with when probed.
SAMPLES: dict[str, bool | int | str | dict[str, bool]] = {
    "stream_options": {"include_usage": True},
    "ignore_eos": True,
    "min_tokens": 0,  # sent as the probed length
    "seed": 0,
    "reasoning_effort": "low",
    "chat_template_kwargs": {"enable_thinking": False},
}


class FieldVerdictJson(TypedDict):
    """One field's verdict as the manifest and the cache hold it."""

    status: str
    detail: str
    checked: bool


class FieldSupportJson(TypedDict):
    """What the manifest's `field_support` holds (`FieldSupport.to_json`), in the order written."""

    source: str
    refused: list[str]
    fields: dict[str, FieldVerdictJson]


@dataclass(frozen=True)
class FieldVerdict:
    """One field's answer: accepted / ignored / refused / can't tell, what was seen, and whether its effect was."""

    status: str
    detail: str
    checked: bool = False


@dataclass
class FieldSupport:
    """Every probed field's verdict, and where it came from (`probed`, or the cache with its time)."""

    fields: dict[str, FieldVerdict] = field(default_factory=dict)
    source: str = "probed"

    def status(self, name: str) -> str | None:
        """The field's status, None when it was not probed."""
        v = self.fields.get(name)
        return v.status if v is not None else None

    def honoured(self, name: str) -> bool:
        """Taken, and its effect seen."""
        v = self.fields.get(name)
        return v is not None and v.status == ACCEPTED and v.checked

    @property
    def refused(self) -> list[str]:
        """Body fields (and the header, as `header:X-Request-Id`) the server refuses: never sent."""
        return [k for k, v in self.fields.items() if v.status == REFUSED]

    def to_json(self) -> FieldSupportJson:
        """What the manifest's `field_support` holds."""
        return {
            "source": self.source,
            "refused": self.refused,
            "fields": {
                k: {"status": v.status, "detail": v.detail, "checked": v.checked} for k, v in self.fields.items()
            },
        }

    @classmethod
    def from_json(cls, data: FieldSupportJson, source: str) -> FieldSupport:
        """Read back what `to_json` wrote (the cache)."""
        return cls({k: FieldVerdict(**v) for k, v in (data.get("fields") or {}).items()}, source)


@dataclass(frozen=True)
class ProbeReply:
    """What one probe request got: HTTP status, the server's words when it refused, tokens and usage seen."""

    status: int | None
    words: str
    ok: bool
    tokens: int | None
    usage: bool
    finish_reason: str | None
    echoed_id: str | None = None


# Sends one streaming request: (body, headers) -> reply. The preflight supplies it (over its aiohttp session).
Send = Callable[[dict[str, Any], dict[str, str]], Awaitable[ProbeReply]]


def bare_body(model: str, max_tokens: int = PROBE_TOKENS) -> dict[str, Any]:
    """The smallest chat request every OpenAI-compatible server takes."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": PROBE_QUESTION}],
        "stream": True,
        "max_tokens": max_tokens,
        "temperature": 0.0,
    }


def length_body(model: str, max_tokens: int) -> dict[str, Any]:
    """A request whose reply a model ends early on its own, with room for `max_tokens`."""
    body = bare_body(model, max_tokens)
    body["messages"] = [{"role": "user", "content": LENGTH_PROMPT}]
    return body


def stop_of(reply: ProbeReply) -> int | None:
    """Where the model ended its reply on its own (tokens), or None when it ran to its cap or the request failed."""
    if reply.ok and reply.tokens is not None and reply.finish_reason == "stop" and reply.tokens < LENGTH_ROOM:
        return reply.tokens
    return None


def lengths_past(stop: int) -> tuple[int, int]:
    """Two lengths past the model's own stop, apart enough that neither can be its answer by chance."""
    return stop + 6, stop + 19


async def judge_length(
    send: Send, name: str, body: dict[str, Any], headers: Callable[[], dict[str, str]], baseline: ProbeReply
) -> FieldVerdict:
    """`ignore_eos` / `min_tokens` at two lengths past where the bare reply stopped on its own."""
    stop = stop_of(baseline)
    if stop is None:
        if not baseline.ok:
            return FieldVerdict(UNKNOWN, f"the probe failed: {baseline.words}")
        got = await send({**body, name: True if name == "ignore_eos" else LENGTH_ROOM}, headers())
        if got.status is not None and 400 <= got.status < 500:
            return FieldVerdict(REFUSED, got.words)
        return FieldVerdict(
            ACCEPTED,
            f"{NOT_SHOWN} (without it the probe's reply ran to {baseline.tokens} tokens, {baseline.finish_reason}: "
            "the model does not stop early on its own)",
        )
    seen = []
    for n in lengths_past(stop):
        got = await send({**body, "max_tokens": n, name: True if name == "ignore_eos" else n}, headers())
        if got.status is not None and 400 <= got.status < 500:
            return FieldVerdict(REFUSED, got.words)
        if not got.ok or got.tokens is None:
            return FieldVerdict(UNKNOWN, f"the probe failed: {got.words}")
        # A stream's chunks may carry several tokens each (vLLM's detokenizer): "length" is the server saying
        # it ran to max_tokens, whatever the chunk count.
        if got.tokens < n and got.finish_reason != "length":
            return FieldVerdict(
                IGNORED,
                f"stopped after {got.tokens} of {n} tokens ({got.finish_reason}) despite it; without it the reply "
                f"ends after {stop}",
            )
        seen.append(f"{n} ({got.finish_reason})" if got.tokens < n else f"{got.tokens}/{n}")
    return FieldVerdict(
        ACCEPTED, f"a reply that ends after {stop} tokens on its own ran to {' and '.join(seen)} with it", True
    )


def _judge(name: str, reply: ProbeReply) -> FieldVerdict:
    if reply.status is not None and 400 <= reply.status < 500:
        return FieldVerdict(REFUSED, reply.words)
    if not reply.ok:
        return FieldVerdict(UNKNOWN, f"the probe failed: {reply.words}")
    if name == "stream_options":
        if reply.usage:
            return FieldVerdict(ACCEPTED, "include_usage honoured: usage in the stream", True)
        return FieldVerdict(IGNORED, "taken, but no usage in the stream")
    return FieldVerdict(ACCEPTED, "taken (HTTP 200); its effect is not checked here")


async def probe_fields(
    send: Send, model: str, extra_body: dict[str, Any], request_id: Callable[[], str], uuid_request_ids: bool = False
) -> FieldSupport:
    """A bare request with a request id (a UUID when the server wants one; without the header when it refuses it),
    then each optional field (and each key of the profile's extra body) alone on it."""
    out = FieldSupport()
    bare = bare_body(model)
    rid = str(uuid.uuid4()) if uuid_request_ids else request_id()
    got = await send(bare, {"X-Request-Id": rid})
    if not got.ok and got.status is not None and 400 <= got.status < 500 and not uuid_request_ids:
        rid = str(uuid.uuid4())
        again = await send(bare, {"X-Request-Id": rid})
        uuid_request_ids = again.ok
        got = again if again.ok else got
    if got.ok:
        echoed = got.echoed_id == rid
        how = "only a UUID, " if uuid_request_ids else ""
        out.fields[HEADER] = FieldVerdict(
            ACCEPTED, how + ("echoed in the response headers" if echoed else "taken, not echoed"), echoed
        )
    else:
        bare_reply = await send(bare, {}) if got.status is not None and 400 <= got.status < 500 else got
        if not bare_reply.ok:
            for name in (*OPTIONAL_FIELDS, HEADER, *extra_body):
                out.fields[name] = FieldVerdict(UNKNOWN, f"even a bare request failed: {bare_reply.words}")
            return out
        out.fields[HEADER] = FieldVerdict(REFUSED, got.words)
        got = bare_reply  # the baseline the fields are compared with
    headers = {} if out.fields[HEADER].status != ACCEPTED else {"X-Request-Id": rid}
    samples = {**SAMPLES, **{k: v for k, v in extra_body.items() if k not in SAMPLES}}

    def fresh() -> dict[str, str]:  # a new id per request: a server may refuse an id it has seen
        return {"X-Request-Id": str(uuid.uuid4()) if uuid_request_ids else request_id()} if headers else {}

    baseline: ProbeReply | None = None
    for name, value in samples.items():
        if name in bare:
            continue  # a profile that sets max_tokens or temperature: part of every request anyway
        if name in LENGTH_FIELDS:
            # Only a forced length needs room to show, against where the model stops without it; counted by the
            # usage chunk where the server gives one (a chunk may hold several tokens).
            lb = length_body(model, LENGTH_ROOM)
            if out.honoured("stream_options"):
                lb["stream_options"] = SAMPLES["stream_options"]
            if baseline is None:
                baseline = await send(lb, fresh())
            out.fields[name] = await judge_length(send, name, lb, fresh, baseline)
            continue
        # The other fields are read from whether they are taken.
        out.fields[name] = _judge(name, await send({**bare, "max_tokens": 1, name: value}, fresh()))
    return out


def length_fields(
    support: FieldSupport | None, max_tokens: int, ignore_eos: bool = True
) -> tuple[dict[str, bool | int], str]:
    """The body fields that force `max_tokens` output tokens on this server, and how (`length_mode`).

    ignore_eos when honoured; else min_tokens when honoured; else none forced (`prompt`: the prompt must run long on
    its own, with max_tokens as its cap). ignore_eos is still sent where not refused (harmless; a server may honour
    it for prompts the probe could not tell). `--no-ignore-eos` (ignore_eos False) forces nothing: neither is sent.
    """
    if not ignore_eos:
        return {}, "prompt"
    if support is None:
        return {"ignore_eos": True}, "ignore_eos"
    if support.honoured("ignore_eos"):
        return {"ignore_eos": True}, "ignore_eos"
    body: dict[str, bool | int] = {}
    if support.status("ignore_eos") != REFUSED:
        body["ignore_eos"] = True
    if support.honoured("min_tokens"):
        return {**body, "min_tokens": max_tokens}, "min_tokens"
    return body, "prompt"


def length_state(support: FieldSupport | None, ignore_eos: bool = True) -> str:
    """The output length's state on this server (`FORCED`, `UNOBSERVED`, `NOT_FORCED`; the module's docstring)."""
    body, mode = length_fields(support, 2, ignore_eos)
    if mode != "prompt":
        return FORCED
    if support is not None and "ignore_eos" in body and support.status("ignore_eos") == ACCEPTED:
        return UNOBSERVED  # sent, taken, and not honoured only because the probe could not show it
    return NOT_FORCED


def length_forced_flag(state: str) -> bool | None:
    """A request line's and a summary's `length_forced`: true forced, null sent but not observable, false not."""
    return {FORCED: True, UNOBSERVED: None}.get(state, False)


def unforced_words(support: FieldSupport | None, ignore_eos: bool = True) -> str:
    """Why no output length is shown forced, in words: refused, stopped early despite it, or sent with its effect not
    observable (a model that talks on either way), never "refused or ignored" where it was neither; a field said
    sent only where the commands send it (min_tokens only where honoured)."""
    if not ignore_eos:
        return "--no-ignore-eos: no length forced"
    if support is None:
        return "the fields were not probed"
    if length_state(support, ignore_eos) == UNOBSERVED:
        detail = support.fields["ignore_eos"].detail
        for old in (NOT_SHOWN, OLD_NOT_SHOWN):  # a cached verdict may be in an earlier release's words
            if detail.startswith(old):
                return "ignore_eos " + NOT_SHOWN + detail[len(old) :]
        return "ignore_eos " + NOT_SHOWN
    parts = []
    for name in LENGTH_FIELDS:
        status = support.status(name)
        how = {REFUSED: "refused", IGNORED: "ignored (stopped early despite it)"}.get(status or "", "")
        if status in (None, UNKNOWN):
            how = "can't tell (its probe failed)" if status == UNKNOWN else "not probed"
        if not how:  # taken with no effect shown: only ignore_eos is sent such (UNOBSERVED, above)
            how = "not sent (its effect could not be observed with this model)"
        parts.append(f"{name} {how}")
    return "; ".join(parts)
