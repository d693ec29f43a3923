"""What the sim answers: capability items right or wrong as intended, stress answers, filler, thinking formats."""

from __future__ import annotations

import asyncio
import re

import pytest

from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.sim.launch import SimProcess, start_sim
from evalkit_evals.datasets import load_items

FAST = ("--time-scale", "200", "--decode-rate", "500", "--batch-decode-rate", "4000", "--max-batch", "16")
PER_DATASET = 8


@pytest.fixture(scope="module")
def shared_sim():
    """One sim for the table tests below (their requests do not interact)."""
    with start_sim(list(FAST)) as s:
        yield s


def _prompt(item) -> str:
    r = item.row
    if item.dataset == "gsm8k":
        return f"Solve the problem.\n\nQuestion: {r['question']}\nAnswer:"
    if item.dataset == "math500":
        return f"Problem: {r['problem']}\n\nPut the final answer in \\boxed{{}}."
    if item.dataset == "musr":
        choices = eval(r["choices"]) if isinstance(r["choices"], str) else r["choices"]
        listed = "\n".join(f"{i + 1} - {c}" for i, c in enumerate(choices))
        return f"{r['narrative']}\n\n{r['question']}\n\nPick one of the choices:\n{listed}\nEnd with ANSWER: n"
    return f"Complete the following function.\n```python\n{r['prompt']}\n```"


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i, depth = start + len("\\boxed{"), 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


def _answer_matches_gold(item, content: str) -> bool:
    r = item.row
    if item.dataset == "gsm8k":
        gold = r["answer"].split("####")[-1].strip().replace(",", "")
        return re.findall(r"-?\d[\d,]*(?:\.\d+)?", content)[-1].replace(",", "") == gold
    if item.dataset == "math500":
        return _last_boxed(content) == r["answer"]
    if item.dataset == "musr":
        return re.search(r"(\d+)\**\s*$", content).group(1) == str(int(r["answer_index"]) + 1)
    return r["canonical_solution"].strip() in content and "NotImplementedError" not in content


def _items(data_dir) -> list:
    out = []
    for ds in ("gsm8k", "math500", "musr", "humanevalplus"):
        items = load_items(ds, data_dir)
        out += items[:: max(1, len(items) // PER_DATASET)][:PER_DATASET]
    return out


async def _ask_all(s, items) -> list[tuple]:
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        recs = await asyncio.gather(
            *[
                c.chat(ChatRequest([{"role": "user", "content": _prompt(it)}], max_tokens=2048, request_id=f"q{i}"))
                for i, it in enumerate(items)
            ]
        )
    events = {e["request_id"]: e for e in s.events()}
    return [(it, r, events[r.request_id]) for it, r in zip(items, recs)]


@pytest.mark.parametrize("accuracy", ["1.0", "0.5"])
async def test_capability_answers_follow_intended_correct(sim, data_dir, accuracy: str) -> None:
    s = sim(*FAST, "--accuracy", accuracy, "--seed", "7")
    results = await _ask_all(s, _items(data_dir))
    flags = []
    for item, rec, ev in results:
        assert rec.status == "ok" and rec.finish_reason == "stop", (item.qid, rec.error)
        assert ev["kind"] == "capability" and ev["question_id"] == item.qid
        assert _answer_matches_gold(item, rec.content) is ev["intended_correct"], (item.qid, rec.content[-200:])
        flags.append(ev["intended_correct"])
    if accuracy == "1.0":
        assert all(flags)
    else:
        assert 0.2 * len(flags) <= sum(flags) <= 0.8 * len(flags)


async def test_stress_answers_filler_and_ignore_eos(sim) -> None:
    s = sim(*FAST)
    long_text = "The secret code is QX-7734-B. " + "Filler sentence about nothing. " * 600
    asks = {
        "short": ([{"role": "user", "content": "What is 17 - 20? Reply with only the number."}], None, {}),
        "long": (
            [{"role": "user", "content": long_text + "What is the secret code? Reply with only the code."}],
            None,
            {},
        ),
        "gen": (
            [{"role": "user", "content": "Count from 1 to 12, separated by commas. Reply with only the numbers."}],
            None,
            {},
        ),
        "filler": ([{"role": "user", "content": "Write a poem about the sea."}], 50, {}),
        "padded": (
            [{"role": "user", "content": "What is 2 * 21? Reply with only the number."}],
            30,
            {"ignore_eos": True},
        ),
    }
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        recs = {
            k: await c.chat(ChatRequest(m, max_tokens=mt, extra_body=eb, request_id=k))
            for k, (m, mt, eb) in asks.items()
        }
    assert recs["short"].content == "-3" and recs["short"].finish_reason == "stop"
    assert recs["long"].content == "QX-7734-B"
    assert recs["gen"].content == ", ".join(str(i) for i in range(1, 13))
    assert recs["filler"].completion_tokens == 50 and recs["filler"].finish_reason == "length"
    assert recs["padded"].completion_tokens == 30 and recs["padded"].content.startswith("42 ")
    kinds = {e["request_id"]: e["kind"] for e in s.events()}
    assert kinds == {
        "short": "stress_short",
        "long": "stress_long",
        "gen": "stress_generation",
        "filler": "filler",
        "padded": "stress_short",
    }
    assert {e["request_id"]: e["prompt_tokens"] for e in s.events()}["long"] > 2048


@pytest.mark.parametrize("fmt", ["reasoning_content", "reasoning", "think_tags", "think_close_only"])
async def test_thinking_formats_keep_reasoning_apart(sim, fmt: str) -> None:
    s = sim(*FAST, "--reasoning-format", fmt)
    msgs = [{"role": "user", "content": "What is 2 + 3? Reply with only the number."}]
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        rec = await c.chat(ChatRequest(msgs, extra_body={"reasoning_effort": "low"}))
    assert rec.status == "ok" and rec.content == "5"
    assert rec.reasoning and len(rec.reasoning.split()) > 30
    separate = fmt in ("reasoning_content", "reasoning")
    assert rec.reasoning_chunks == (60 if separate else 0)
    assert rec.completion_tokens == (61 if separate else rec.content_chunks)
    assert s.events()[0]["thinking"] is True


@pytest.mark.parametrize(
    "extra, system, tokens",
    [
        ({}, None, 0),
        ({"chat_template_kwargs": {"enable_thinking": True}}, None, 150),
        ({"chat_template_kwargs": {"enable_thinking": False}, "reasoning_effort": "high"}, None, 0),
        ({"reasoning_effort": "low"}, None, 60),
        ({"reasoning_effort": "high"}, None, 300),
        ({"reasoning_effort": "none"}, None, 0),
        ({}, "You are helpful. /think", 150),
        ({}, "You are helpful. /no_think", 0),
    ],
)
async def test_thinking_switches(shared_sim: SimProcess, extra: dict, system: str | None, tokens: int) -> None:
    s = shared_sim
    msgs = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": "What is 2 + 3? Reply with only the number."}
    ]
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        rec = await c.chat(ChatRequest(msgs, extra_body=extra))
    assert rec.reasoning_chunks == tokens and rec.content == "5"


async def test_default_thinking_on(sim) -> None:
    s = sim(*FAST, "--default-thinking", "on")
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        on = await c.chat(ChatRequest([{"role": "user", "content": "Hi"}], max_tokens=200))
        off = await c.chat(
            ChatRequest(
                [{"role": "user", "content": "Hi"}],
                max_tokens=20,
                extra_body={"chat_template_kwargs": {"enable_thinking": False}},
            )
        )
    assert on.reasoning_chunks == 150 and on.content_chunks == 50
    assert off.reasoning_chunks == 0 and off.content_chunks == 20
