"""Recognising what a chat asks: a capability dataset item, one of the stress command's questions, or nothing.

Capability items are recognised when a user message contains the item's stripped text verbatim, as its eval's
`sim_anchor` names it (GSM8K `question`, MATH-500 `problem`, MuSR `narrative` and `question`, HumanEval+ `prompt`,
a user eval's rendered prompt); every registered eval is indexed (`evalkit_evals.registry`). The index keys every item
on the first 32 characters of that text and looks them up at each word start of the message, so recognising a
54K-token prompt costs a few tens of milliseconds, not a scan per item.
"""

from __future__ import annotations

import gc
import os
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any

from evalkit.client.tokens import message_text
from evalkit.sim.chat_message import ChatMessage

KEY_LEN = 32
_SHORT = re.compile(r"What is (-?\d+) ([+\-*]) (-?\d+)\? Reply with only the number\.")
_CODE = re.compile(r"The secret code is ([A-Z0-9-]+)\.")
_LONG_END = "What is the secret code? Reply with only the code."
_COUNT = re.compile(r"Count from 1 to (\d+), separated by commas\. Reply with only the numbers\.")
_WORD_START = re.compile(r"(?<!\w)(?=\S)")
_ECHO = re.compile(r"^Reply with just: (.+?)\s*$")  # the preflight's forced-length probe: answered with the text


@dataclass(frozen=True)
class Question:
    """What the sim recognised: kind, question id (capability only) and what is needed to answer it."""

    kind: str  # capability | judge | stress_short | stress_long | stress_generation | echo | filler
    qid: str | None = None
    dataset: str | None = None
    # A stress question's known answer; a judge prompt's (reference, response). A capability item's is in its row.
    gold: Any = None
    row: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Entry:
    anchor: str
    also: str | None  # MuSR: the question must be present too
    question: Question


def _entry(dataset: str, qid: str, row: dict[str, Any], anchor: tuple[str, str | None]) -> _Entry:
    return _Entry(anchor[0], anchor[1], Question("capability", qid, dataset, None, row))


def indexed_names(data_dir: str | None) -> list[str]:
    """The evals the sim recognises: every registered one with a data directory (`--data-dir` or
    `$EVALKIT_DATA_DIR`), else only those registered at run time (`--eval FILE`; the built-ins would need the Hub)."""
    from evalkit_evals import registry

    if data_dir is None and not os.environ.get("EVALKIT_DATA_DIR"):
        return [n for n in registry.names() if n not in registry.BUILTIN]
    return registry.names()


class QuestionIndex:
    """Capability items keyed for fast lookup; loaded once, on first use, from the data directory."""

    def __init__(self, data_dir: str | None) -> None:
        self._data_dir = data_dir
        self._lock = threading.Lock()
        self._by_key: dict[str, list[_Entry]] | None = None
        self._short: list[_Entry] = []
        self.load_error: str | None = None

    def _load(self) -> None:
        from evalkit_evals import registry

        by_key: dict[str, list[_Entry]] = {}
        for ds in indexed_names(self._data_dir):
            try:
                ev = registry.get(ds)
                items = ev.load(self._data_dir)
            except Exception as e:  # noqa: BLE001 - a missing dataset only disables recognising it
                self.load_error = f"{ds}: {e}"
                sys.stderr.write(f"evalkit sim: capability questions of {ds} not recognised ({e})\n")
                continue
            for it in items:
                ent = _entry(ds, it.qid, it.row, ev.sim_anchor(it.row))
                if len(ent.anchor) < KEY_LEN:
                    self._short.append(ent)
                else:
                    by_key.setdefault(ent.anchor[:KEY_LEN], []).append(ent)
        self._by_key = by_key

    def ensure_loaded(self) -> None:
        """Load the datasets (blocking; call from a worker thread)."""
        with self._lock:
            if self._by_key is None:
                self._load()
                gc.freeze()  # thousands of dataset rows, kept for good: out of the collector's way

    def find(self, text: str) -> Question | None:
        """The capability item whose text this message contains (the longest when several do)."""
        self.ensure_loaded()
        assert self._by_key is not None
        best: _Entry | None = None
        for m in _WORD_START.finditer(text):
            i = m.start()
            for ent in self._by_key.get(text[i : i + KEY_LEN], ()):
                if (
                    text.startswith(ent.anchor, i)
                    and (ent.also is None or ent.also in text)
                    and (best is None or len(ent.anchor) > len(best.anchor))
                ):
                    best = ent
        for ent in self._short:
            if ent.anchor in text and (best is None or len(ent.anchor) > len(best.anchor)):
                best = ent
        return best.question if best else None


def stress_question(text: str) -> Question | None:
    """One of the stress command's fixed phrasings, or None."""
    m = _SHORT.search(text)
    if m:
        a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
        value = a + b if op == "+" else a - b if op == "-" else a * b
        return Question("stress_short", gold=value)
    if text.rstrip().endswith(_LONG_END):
        m = _CODE.search(text)
        if m:
            return Question("stress_long", gold=m.group(1))
    m = _COUNT.search(text)
    if m:
        return Question("stress_generation", gold=int(m.group(1)))
    m = _ECHO.match(text.strip())
    if m:
        return Question("echo", gold=m.group(1))
    return None


def judge_question(text: str) -> Question | None:
    """A judge's equality-check prompt (`evalkit_evals.model_judge`), or the extraction prompt of
    `capability --judge-self` (kind `extract`: the sim answers the response's last line), or None."""
    from evalkit_evals.model_judge import parse_extract_prompt, parse_judge_prompt

    pair = parse_judge_prompt(text)
    if pair is not None:
        return Question("judge", gold=pair)
    response = parse_extract_prompt(text)
    return Question("extract", gold=response) if response is not None else None


def user_texts(messages: list[ChatMessage]) -> list[str]:
    """User messages' text, the last first (where the question usually is)."""
    return [message_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"]


def recognise(messages: list[ChatMessage], index: QuestionIndex | None) -> Question:
    """What the chat asks; filler when nothing is recognised."""
    texts = user_texts(messages)
    for t in texts:
        q = stress_question(t) or judge_question(t)
        if q:
            return q
    if index is not None:
        for t in texts:
            q = index.find(t)
            if q:
                return q
    return Question("filler")
