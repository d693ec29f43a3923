"""Trace replay: a timestamped trace in the Mooncake JSONL form, sent open loop on its own timeline.

One JSON object a line: `timestamp` (ms since the trace began), `input_length` and `output_length` (tokens) and
`hash_ids`, one id per block of `--trace-block-tokens` prompt tokens (Mooncake's 512); two requests with the same
leading ids share that prompt prefix. `--speedup F` divides every gap by F, `--trace-window A:B` keeps the lines
from A to B seconds of trace time (the window's start becomes time 0), `--trace-sample P` keeps each line with
probability P drawn from the seed.

Prompts: block `h` is seeded filler of the block's length, the same text wherever `h` appears, and every block
starts on a word with its leading space, so a tokenizer splits the prompt at block edges and equal ids give equal
token blocks. The lengths are the server's tokens through the run's token scale (evalkit/load/tokens.py). A
partial last block is the start of the full block's text. The prompt ends in `Count from 1 to n` for an answer of
about `output_length` tokens, so every answer is still checked; the count's tokens are taken from the last block.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalkit.client.prompts import GenQuestion, filler_words
from evalkit.client.tokens import count_tokens
from evalkit.errors import UsageError
from evalkit.load.schedule import PointPlan, PointSpec
from evalkit.load.workload import CHAT_OVERHEAD, MAX_LENGTH_TOKENS, Lengths, LoadRequest, Workload, count_for

MOONCAKE_BLOCK_TOKENS = 512
# Bounds of a trace (docs/conventions.md, "Bounds"): a week of trace time, lines and lengths far above Mooncake's
# own (23,608 lines, inputs up to ~125,000 tokens), so a bad file is one line, not minutes of planning or MemoryError.
MAX_TRACE_MS = 7 * 24 * 3600 * 1000.0
MAX_TRACE_LINES = 1_000_000


class TraceLine(BaseModel):
    """One line of a Mooncake trace."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
    timestamp: float = Field(ge=0, le=MAX_TRACE_MS)
    input_length: int = Field(ge=1, le=MAX_LENGTH_TOKENS)
    output_length: int = Field(ge=1, le=MAX_LENGTH_TOKENS)
    hash_ids: list[int] = Field(default_factory=list, max_length=MAX_LENGTH_TOKENS)


@dataclass(frozen=True)
class TraceOptions:
    """How to replay: speed, window (trace seconds), sample fraction, block size and seed."""

    speedup: float = 1.0
    window: tuple[float, float | None] = (0.0, None)
    sample: float = 1.0
    block_tokens: int = MOONCAKE_BLOCK_TOKENS
    seed: int = 42


def parse_window(text: str) -> tuple[float, float | None]:
    """`A:B` or `A:` (seconds of trace time)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*:\s*(\d+(?:\.\d*)?)?\s*", text)
    if not m or (m.group(2) is not None and float(m.group(2)) <= float(m.group(1))):
        raise UsageError(f"--trace-window takes A:B or A: in seconds with B above A, not {text!r}")
    return float(m.group(1)), float(m.group(2)) if m.group(2) is not None else None


def read_trace(path: Path) -> list[TraceLine]:
    """Every line of the trace file, in file order; one line on a bad line or file (UsageError)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--trace {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"--trace {path}: not UTF-8 text (byte {e.start}): a JSONL trace is text") from None
    out: list[TraceLine] = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        if len(out) >= MAX_TRACE_LINES:
            raise UsageError(f"--trace {path}: more than {MAX_TRACE_LINES:,} requests; replay a --trace-window of it")
        try:
            out.append(TraceLine.model_validate_json(raw))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ())) or "line"
            raise UsageError(f"--trace {path}:{n}: {where}: {first.get('msg')}") from None
    if not out:
        raise UsageError(f"--trace {path}: no requests in the file")
    return out


def select(lines: list[TraceLine], opts: TraceOptions) -> list[tuple[float, TraceLine]]:
    """(send offset in seconds, line) of the lines the window and sample keep, in time order."""
    t0 = min(x.timestamp for x in lines) / 1000.0
    start, end = opts.window
    rng = random.Random(f"trace-sample:{opts.seed}")
    kept = []
    for line in sorted(lines, key=lambda x: x.timestamp):
        t = line.timestamp / 1000.0 - t0
        draw = rng.random()  # drawn for every line, so the window does not change which lines a sample keeps
        if t < start or (end is not None and t >= end) or draw >= opts.sample:
            continue
        kept.append(((t - start) / opts.speedup, line))
    return kept


@lru_cache(maxsize=4096)
def block_tokens_text(hash_id: int, tokens: int) -> tuple[str, ...]:
    """Block `hash_id`'s filler as sim-rule tokens, each word with its leading space; sentences end in `.`."""
    rng = random.Random(f"trace-block:{hash_id}")
    vocab = filler_words()
    out: list[str] = []
    while len(out) < tokens:
        n = rng.randint(8, 16)
        words = [" " + rng.choice(vocab) for _ in range(n - 1)]
        words[0] = " " + words[0][1:].capitalize()
        out += words + ["."]
    return tuple(out[:tokens])


def build_trace_request(line: TraceLine, index: int, opts: TraceOptions, token_scale: float) -> LoadRequest:
    """Request `index` of the replay: its blocks, the rest of its length, then the count."""
    n = count_for(line.output_length, index)
    question = GenQuestion(n).text
    want = round(line.input_length / token_scale) - CHAT_OVERHEAD - count_tokens("\n\n" + question)
    block = max(1, round(opts.block_tokens / token_scale))
    parts: list[str] = []
    left = max(0, want)
    for h in line.hash_ids:
        if left <= 0:
            break
        take = min(block, left)
        parts += block_tokens_text(h, block)[:take]
        left -= take
    if left > 0:  # longer than its blocks: the rest is the request's own
        parts += block_tokens_text(-(index + 1), left)
    text = "".join(parts).lstrip() + "\n\n" + question
    return LoadRequest(
        index=index,
        prompt=text,
        count_to=n,
        prompt_tokens=round((count_tokens(text) + CHAT_OVERHEAD) * token_scale),
        output_tokens=count_tokens(GenQuestion(n).answer),
    )


def ideal_hit_tokens(selected: list[tuple[float, TraceLine]], block_tokens: int) -> tuple[int, int]:
    """(input tokens whose block id was seen before in a leading run, input tokens): an unbounded cache's hits."""
    seen: set[int] = set()
    hit = total = 0
    for _, line in selected:
        lead = True
        for i, h in enumerate(line.hash_ids):
            size = min(block_tokens, max(0, line.input_length - i * block_tokens))
            if lead and h in seen:
                hit += size
            else:
                lead = False
            seen.add(h)
        total += line.input_length
    return hit, total


@dataclass(frozen=True)
class TracePlan(PointPlan):
    """A load point whose sends come from a trace: the requests and their offsets fixed before it starts."""

    requests: tuple[LoadRequest, ...] = field(default=())
    offsets: tuple[float, ...] = field(default=())

    def request(self, index: int) -> LoadRequest:
        """Request `index` of the replay."""
        return self.requests[index]

    def phase(self, index: int) -> str:
        """Every replayed request is measured."""
        return "measured"

    def send_offsets(self) -> list[float]:
        """Each request's send time from the start."""
        return list(self.offsets)


def trace_plan(lines: list[TraceLine], opts: TraceOptions, token_scale: float) -> TracePlan:
    """The replay as one open-loop point (its `load` is the mean rate over the replay)."""
    selected = select(lines, opts)
    if not selected:
        raise UsageError("--trace: the window and sample keep no request")
    offsets = tuple(t for t, _ in selected)
    reqs = tuple(build_trace_request(line, i, opts, token_scale) for i, (_, line) in enumerate(selected))
    span = offsets[-1] - offsets[0]
    rate = (len(offsets) - 1) / span if span > 0 else float(len(offsets))
    workload = Workload(Lengths(0, 0), Lengths(0, 0), 0, token_scale)
    return TracePlan(
        seed=opts.seed,
        spec=PointSpec("rate", rate, 0),
        workload=workload,
        warmup=0,
        measured=len(reqs),
        duration_s=None,
        requests=reqs,
        offsets=offsets,
    )
