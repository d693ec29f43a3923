"""`evalkit sim` speaks the OpenAI chat API: the official client and plain curl stream from it."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request

import openai
import pytest

from evalkit.client.tokens import count_tokens, prompt_tokens

SHORT = "What is 12 * 3? Reply with only the number."


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.parametrize(
    "text, n",
    [
        ("", 0),
        ("hello", 1),
        ("Hello, world!", 4),
        ("  indented\n    code()", 4),
        ("1,234.5", 5),
        ("don't", 3),
        ("trailing space   ", 2),
    ],
)
def test_token_rule(text: str, n: int) -> None:
    assert count_tokens(text) == n


async def test_openai_client_streams_content_and_usage(sim) -> None:
    s = sim("--time-scale", "20")
    client = openai.AsyncOpenAI(base_url=s.base_url, api_key="unused", max_retries=0)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["evalkit-sim"]
    messages = [{"role": "user", "content": SHORT}]
    stream = await client.chat.completions.create(
        model="evalkit-sim",
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"X-Request-Id": "proto-1"},
    )
    chunks = [c async for c in stream]
    await client.close()
    first = chunks[0].choices[0].delta
    assert first.role == "assistant" and not first.content  # the role-only chunk carries no token
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "36"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 1
    assert chunks[-1].usage.prompt_tokens == prompt_tokens(messages)
    ev = s.event("proto-1")
    assert ev["status"] == "ok" and ev["kind"] == "stress_short" and ev["intended_correct"] is True
    assert ev["arrived"] <= ev["prefill_start"] <= ev["prefill_done"] <= ev["first_token"] <= ev["done"]


async def test_no_usage_without_include_usage_and_non_streaming(sim) -> None:
    s = sim("--time-scale", "20")
    client = openai.AsyncOpenAI(base_url=s.base_url, api_key="unused", max_retries=0)
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Hi"}], stream=True, max_tokens=7
    )
    chunks = [c async for c in stream]
    assert all(c.usage is None for c in chunks)
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) == 7
    assert chunks[-1].choices[0].finish_reason == "length"
    full = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": SHORT}])
    await client.close()
    assert full.choices[0].message.content == "36" and full.choices[0].finish_reason == "stop"
    assert full.usage is not None and full.usage.completion_tokens == 1
    evs = s.events()
    assert [e["stream"] for e in evs] == [True, False]
    assert all(e["request_id"] for e in evs)  # generated when the client sends no X-Request-Id


def test_curl_streams(sim) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl not installed")
    s = sim("--time-scale", "20")
    body = {
        "model": "m",
        "stream": True,
        "messages": [
            {"role": "user", "content": "Count from 1 to 4, separated by commas. Reply with only the numbers."}
        ],
    }
    out = subprocess.run(
        [
            curl,
            "-sN",
            "-H",
            "Content-Type: application/json",
            "-H",
            "X-Request-Id: curl-1",
            "-d",
            json.dumps(body),
            f"{s.base_url}/chat/completions",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    lines = [ln[len("data: ") :] for ln in out.splitlines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    deltas = [json.loads(ln)["choices"][0]["delta"].get("content") for ln in lines[:-1]]
    assert "".join(d or "" for d in deltas) == "1, 2, 3, 4"
    assert s.event("curl-1")["completion_tokens"] == len([d for d in deltas if d])


def test_tokenize_and_ground_truth_endpoints(sim) -> None:
    s = sim("--time-scale", "20", "--max-batch", "3", "--clamp-batch")
    assert _post(s.root_url + "/tokenize", {"content": "Hello, world!"})["tokens"].__len__() == 4
    assert _post(s.root_url + "/tokenize", {"prompt": "a b c"})["count"] == 3
    msgs = [{"role": "user", "content": "Hello, world!"}]
    assert _post(s.root_url + "/tokenize", {"messages": msgs})["count"] == 4 + 4 + 2
    cfg = s.config()
    assert cfg["max_batch"] == 3 and cfg["effective_max_batch"] == 1 and cfg["clamp_batch"] is True
    assert s.stderr_text().count("explicit-token safety max_batch limited 3 -> 1") == 1
    _post(s.base_url + "/chat/completions", {"messages": msgs, "max_tokens": 2})
    assert len(s.events()) == 1
    s.reset()
    assert s.events() == []


def test_sim_event_names_the_trace_fields_in_order() -> None:
    """`SimEvent` (what /sim/events lists) and `RequestTrace` (what it lists) keep the same fields."""
    from dataclasses import fields

    from evalkit.sim.trace import RequestTrace, SimEvent

    assert list(SimEvent.__annotations__) == [f.name for f in fields(RequestTrace)]
