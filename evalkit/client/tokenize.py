"""Counting a chat prompt's tokens the way the server will, so long prompts hit `--long-tokens` within 2%.

Tried in order, at the server's root (base URL without `/v1`):
1. vLLM `POST /tokenize {"model", "messages"}` → `count` (the chat template is included);
2. vLLM / SGLang `POST /tokenize {"model", "prompt"}` → `count` (content only);
3. llama.cpp `POST /tokenize {"content"}` → `tokens` (content only);
4. llama-cpp-python `POST /extras/tokenize {"input"}` → `tokens` (content only).
With 2, 3 or 4 the chat template's overhead is measured once from a tiny request's reported `prompt_tokens`.
With none, a line `prompt_tokens = a * local_estimate + b` is fitted on two small requests ("calibrated").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypedDict

from evalkit.addresses import server_root
from evalkit.client import auxiliary
from evalkit.client.prompts import LongSpec, chat_tokens_local, local_token_count

# A chat request sent only to read `usage.prompt_tokens`: (messages) -> prompt tokens or None.
UsageProbe = Callable[[list[dict[str, str]]], Awaitable[int | None]]

PROBE_TEXT = "The quick brown fox jumps over the lazy dog."


def messages_for(text: str) -> list[dict[str, str]]:
    """The chat messages a stress prompt is sent as."""
    return [{"role": "user", "content": text}]


class _AttemptBase(TypedDict):
    method: str
    ok: bool


class TokenizeAttempt(_AttemptBase, total=False):
    """One way of counting tried (the manifest's `tokenization.tried`): its endpoint, and why it failed."""

    url: str
    error: str


class Calibration(TypedDict):
    """The line a calibrated counter maps local counts through."""

    slope: float
    intercept: float


class CounterDescription(TypedDict):
    """The manifest's `tokenization` (`TokenCounter.describe`), in the order written."""

    method: str
    url: str | None
    template_overhead: int | None
    calibration: Calibration | None
    tried: list[TokenizeAttempt]


class TokenizeBody(TypedDict, total=False):
    """What a tokenize endpoint is sent: the chat (`messages`), or its text under the endpoint's own name."""

    model: str | None
    messages: list[dict[str, str]]
    prompt: str
    content: str
    input: str


@dataclass
class TokenCounter:
    """Counts a chat prompt's tokens by the best method the server offers; records what it tried."""

    method: str  # messages | prompt | content | extras | calibrated | local
    url: str | None = None
    model: str | None = None
    template_overhead: int | None = None
    slope: float = 1.0
    intercept: float = 0.0
    tried: list[TokenizeAttempt] = field(default_factory=list)

    def describe(self) -> CounterDescription:
        """What goes into the manifest (a `CounterDescription`): method, endpoint, overhead and every attempt."""
        return {
            "method": self.method,
            "url": self.url,
            "template_overhead": self.template_overhead,
            "calibration": {"slope": self.slope, "intercept": self.intercept} if self.method == "calibrated" else None,
            "tried": self.tried,
        }

    @classmethod
    def from_description(cls, desc: CounterDescription, base_url: str, model: str) -> TokenCounter:
        """The counter a manifest's `tokenization` describes, at this base URL (a resumed run counts as before)."""
        calibration = desc.get("calibration")
        method = desc["method"]
        return cls(
            method=method,
            url=None if method in ("calibrated", "local") else server_root(base_url) + _PATHS.get(method, "/tokenize"),
            model=model,
            template_overhead=desc.get("template_overhead"),
            slope=float(calibration.get("slope", 1.0) if calibration else 1.0),
            intercept=float(calibration.get("intercept", 0.0) if calibration else 0.0),
        )

    async def count(self, session: auxiliary.ClientSession | None, messages: list[dict[str, str]]) -> int:
        """Prompt tokens the server will report for these messages (template included)."""
        if self.method == "local":
            return chat_tokens_local(messages)
        if self.method == "calibrated":
            return round(self.slope * chat_tokens_local(messages) + self.intercept)
        assert session is not None and self.url is not None
        if self.method == "messages":
            n = await _post_count(session, self.url, {"model": self.model, "messages": messages})
            assert n is not None
            return n
        text = "".join(m["content"] for m in messages)
        body: TokenizeBody = (
            {"model": self.model, "prompt": text}
            if self.method == "prompt"
            else {"input": text}
            if self.method == "extras"
            else {"content": text}
        )
        n = await _post_count(session, self.url, body)
        assert n is not None
        return n + (self.template_overhead or 0)


# Where each method's endpoint is, when it is not `/tokenize`.
_PATHS = {"extras": "/extras/tokenize"}


async def _post_count(session: auxiliary.ClientSession, url: str, body: TokenizeBody) -> int | None:
    async with session.post(url, json=body, timeout=auxiliary.ClientTimeout(total=120)) as resp:
        if resp.status != 200:
            return None
        data = await auxiliary.read_json(resp)
    # A server that does not understand the body may still answer 200 with an empty list (llama.cpp does for
    # `messages`): no text tokenizes to nothing, so zero means "not understood".
    if isinstance(data, dict):
        if isinstance(data.get("count"), int) and data["count"] > 0:
            return int(data["count"])
        if isinstance(data.get("tokens"), list) and data["tokens"]:
            return len(data["tokens"])
    return None


async def probe_counter(
    session: auxiliary.ClientSession, base_url: str, model: str, usage_probe: UsageProbe
) -> TokenCounter:
    """Find how this server counts tokens (see the module docstring for the order tried)."""
    url = server_root(base_url) + "/tokenize"
    msgs = messages_for(PROBE_TEXT)
    attempts: list[tuple[str, TokenizeBody]] = [
        ("messages", {"model": model, "messages": msgs}),
        ("prompt", {"model": model, "prompt": PROBE_TEXT}),
        ("content", {"content": PROBE_TEXT}),
        ("extras", {"input": PROBE_TEXT}),
    ]
    tried: list[TokenizeAttempt] = []
    for method, body in attempts:
        url = server_root(base_url) + _PATHS.get(method, "/tokenize")
        try:
            n = await _post_count(session, url, body)
            tried.append({"method": method, "url": url, "ok": n is not None})
        except (auxiliary.ClientError, TimeoutError, ValueError) as e:
            n = None
            tried.append({"method": method, "url": url, "ok": False, "error": f"{type(e).__name__}: {e}"})
        if n is None:
            continue
        counter = TokenCounter(method=method, url=url, model=model, tried=tried)
        if method != "messages":
            reported = await usage_probe(msgs)
            # Without reported usage the template's cost stays unknown; the sim's rule is the best guess.
            counter.template_overhead = (
                (reported - n) if reported is not None else chat_tokens_local(msgs) - local_token_count(PROBE_TEXT)
            )
        else:
            # Recorded for the manifest only: the messages count already includes the template.
            for _, content_body in attempts[1:]:
                try:
                    m = await _post_count(session, url, content_body)
                except (auxiliary.ClientError, TimeoutError, ValueError):
                    m = None
                if m is not None:
                    counter.template_overhead = n - m
                    break
        return counter
    return await _calibrate(usage_probe, tried)


async def _calibrate(usage_probe: UsageProbe, tried: list[TokenizeAttempt]) -> TokenCounter:
    # Two points fix a line; the long prompt is then fitted by extrapolation and its real count recorded.
    small = messages_for(PROBE_TEXT)
    big_spec = LongSpec(first_word="calibration", filler_seed=7, code="CALI-BRAT-IONX", code_at=0.5)
    big = messages_for(big_spec.text(160))
    a_loc, b_loc = chat_tokens_local(small), chat_tokens_local(big)
    a_srv, b_srv = await usage_probe(small), await usage_probe(big)
    tried.append({"method": "calibrated", "ok": a_srv is not None and b_srv is not None})
    if a_srv is None or b_srv is None or b_loc == a_loc:
        return TokenCounter(method="local", tried=tried)
    slope = (b_srv - a_srv) / (b_loc - a_loc)
    return TokenCounter(method="calibrated", slope=slope, intercept=a_srv - slope * a_loc, tried=tried)


@dataclass(frozen=True)
class FittedPrompt:
    """A long prompt cut to length: its text, sentence count and the token count the counter gave."""

    text: str
    sentences: int
    counted_tokens: int


async def fit_long_prompt(
    spec: LongSpec,
    target: int,
    counter: TokenCounter,
    session: auxiliary.ClientSession | None,
    tolerance: float = 0.005,
) -> FittedPrompt:
    """Grow or shrink the filler until the counted prompt is within `tolerance` of `target` tokens."""

    async def count(n: int) -> int:
        return await counter.count(session, messages_for(spec.text(n)))

    base = await count(0)
    per = max(
        1e-6, (chat_tokens_local(messages_for(spec.text(64))) - chat_tokens_local(messages_for(spec.text(0)))) / 64
    )
    n = max(0, round((target - base) / per))
    best: tuple[int, int] | None = None
    for _ in range(8):
        c = await count(n)
        if best is None or abs(c - target) < abs(best[1] - target):
            best = (n, c)
        if abs(c - target) <= tolerance * target or c == base:
            break
        # Tokens grow linearly with sentences, so a secant step from the empty prompt converges in 2-3 rounds.
        n = max(0, round(n * (target - base) / max(1, c - base)))
    assert best is not None
    return FittedPrompt(text=spec.text(best[0]), sentences=best[0], counted_tokens=best[1])
