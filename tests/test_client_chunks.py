"""How the client folds real servers' event streams into a record (transcripts recorded from llama.cpp and FastLLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.client.chat import StreamError, _EventStream, _sse_data
from evalkit.runs.records import RequestRecord

SERVERS = Path(__file__).resolve().parents[2] / "shared" / "reference" / "servers"


def fold(lines: list[str]) -> tuple[RequestRecord, str, str]:
    """The transcript fed line by line to the event-stream reader the client uses (line i read at time i)."""
    rec = RequestRecord(request_id="r", t_sent=0.0)
    content: list[str] = []
    reasoning: list[str] = []
    events = _EventStream(rec, content, reasoning, None)
    events.on_head(200, {}, 0.0)
    for i, line in enumerate(lines):
        events.on_data(line.encode() + b"\n", float(i))
    events.flush()
    return rec, "".join(content), "".join(reasoning)


@pytest.mark.parametrize(
    "transcript, completion_tokens, content_chunks, timings",
    [
        ("sse-sample.txt", 14, 13, True),  # usage in a trailing choices:[] chunk, timings; EOS counted, not streamed
        ("sse-sample-ftllm.txt", 13, 13, False),  # usage inside the finish chunk, no timings
    ],
)
def test_real_server_transcripts(transcript, completion_tokens, content_chunks, timings):
    path = SERVERS / transcript
    if not path.exists():
        pytest.skip(f"{path} not present")
    rec, content, reasoning = fold(path.read_text().splitlines())
    assert content.startswith("1, 2, 3")
    assert reasoning == ""
    assert rec.finish_reason == "stop"
    assert (rec.prompt_tokens, rec.completion_tokens, rec.usage_source) == (37, completion_tokens, "server")
    assert rec.content_chunks == content_chunks
    # the role-only first chunk is not a token: the first token is the first chunk with text
    assert rec.t_first_token == rec.chunk_times[0] and len(rec.chunk_times) == content_chunks
    assert (rec.server_timings is not None) == timings


@pytest.mark.parametrize(
    "line, payload",
    [
        (b'data: {"a": 1}', b'{"a": 1}'),
        (b'data:{"a": 1}', b'{"a": 1}'),
        (b"data: [DONE]", b"[DONE]"),
        (b": keep-alive comment", None),
        (b"", None),
        (b"event: message", None),
    ],
)
def test_sse_data(line, payload):
    assert _sse_data(line) == payload


@pytest.mark.parametrize(
    "delta, content, reasoning",
    [
        ({"reasoning_content": "hmm"}, "", "hmm"),
        ({"reasoning": "hmm"}, "", "hmm"),
        ({"content": "4"}, "4", ""),
        ({"content": "", "reasoning_content": None}, "", ""),
        ({"role": "assistant", "content": None}, "", ""),
    ],
)
def test_reasoning_fields(delta, content, reasoning):
    rec, c, r = fold([f"data: {json.dumps({'choices': [{'index': 0, 'delta': delta}]})}"])
    assert (c, r) == (content, reasoning)
    assert rec.t_first_token == (0.0 if content or reasoning else None)


def test_error_event_inside_the_stream_raises():
    with pytest.raises(StreamError, match="out of memory"):
        fold(['data: {"error": {"message": "out of memory", "code": 500}}'])


def test_chunks_the_typed_decoder_does_not_take_are_folded_as_plain_json():
    # msgspec's structs take the usual chunk; these odd ones go to the dictionary fold and still count right
    lines = [
        'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}',  # the usual shape
        'data: {"choices":[{"index":0,"delta":"not an object","finish_reason":null}]}',  # skipped, not an error
        'data: {"choices":[{"index":0,"delta":{"content":7},"finish_reason":null}]}',  # not text: no token
        'data: {"choices":"none","usage":{"prompt_tokens":3,"completion_tokens":2}}',  # choices not a list
        'data: {"choices":[{"index":0,"delta":{"reasoning":"hm","content":"b"},"finish_reason":"stop"}]}',
    ]
    rec, content, reasoning = fold(lines)
    assert (content, reasoning) == ("ab", "hm")
    assert (rec.content_chunks, rec.reasoning_chunks, rec.finish_reason) == (2, 1, "stop")
    assert (rec.prompt_tokens, rec.completion_tokens, rec.usage_source) == (3, 2, "server")
    assert rec.chunk_times == [0.0, 4.0] and rec.t_first_token == 0.0
