"""Asking and grading: the live run against a server, and the replay of recorded answers without one.

Requests go out `concurrency` at a time; each answer is graded in a worker thread as soon as it arrives (two
gradings at a time: the sandbox and math-verify are CPU-bound and the machine may have two cores) and its line
is appended to `graded.jsonl` at once, so a killed run loses nothing and resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from evalkit.client.chat import ChatClient, ChatRequest, new_request_id
from evalkit.errors import UsageError
from evalkit.runs.rundir import RunDir, read_jsonl
from evalkit.runs.schemas import GradedLine, ReplayLine, validate
from evalkit_evals.datasets import DatasetItem
from evalkit_evals.grader import Grader, graded_line, inline_reasoning, token_counts
from evalkit_evals.prompting import build_messages, render_prompt
from evalkit_evals.verdict import Verdict

GRADED = "graded.jsonl"
GRADING_WORKERS = 2


@dataclass(frozen=True)
class Sampling:
    """How each question is asked: `repeats` times at `temperature`; repeat k sends `seed` k when sampling."""

    repeats: int = 1
    temperature: float = 0.0
    timeout_s: float = 900.0  # per request (`--timeout-s`)

    def seed_body(self, repeat: int) -> dict[str, Any]:
        """The per-repeat `seed`, so a sampled run can be asked again alike (greedy runs send none)."""
        return {"seed": repeat} if self.temperature > 0 else {}


class _Progress:
    """tqdm on stderr with the running accuracy."""

    def __init__(self, total: int, done: list[dict[str, Any]]) -> None:
        self.correct = sum(1 for d in done if d["correct"])
        self.seen = len(done)
        # disable=None: a bar only on a terminal; a log gets the summary lines, not one carriage-return line.
        self.bar = tqdm(
            total=total,
            initial=len(done),
            file=sys.stderr,
            desc="capability",
            unit="q",
            dynamic_ncols=True,
            leave=True,
            disable=None,
        )
        self._post()

    def _post(self) -> None:
        if self.seen:
            self.bar.set_postfix_str(f"acc {self.correct}/{self.seen} = {100 * self.correct / self.seen:.1f}%")

    def add(self, correct: bool) -> None:
        self.seen += 1
        self.correct += int(correct)
        self._post()
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _key(line: dict[str, Any]) -> tuple[str, int]:
    return line["id"], int(line.get("repeat") or 0)


def _first_per_key(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[tuple[str, int]] = set()
    out = []
    for ln in lines:
        if _key(ln) not in seen:
            seen.add(_key(ln))
            out.append(ln)
    return out


async def run_live(
    rundir: RunDir,
    client: ChatClient,
    items: list[DatasetItem],
    grader: Grader,
    revisions: dict[str, str],
    extra_body: dict[str, Any],
    system_prompt: str | None,
    max_tokens: int,
    concurrency: int,
    sampling: Sampling = Sampling(),
    graded: str = GRADED,
    pass_tags: dict[str, Any] | None = None,
) -> None:
    """Ask every (item, repeat) not yet graded in this run directory, grade each answer and append its line.

    `graded` names the file (`--under-load` keeps its idle pass in another), `pass_tags` label its request lines."""
    previous = read_jsonl(rundir.path / graded, GradedLine)  # a bad line exits 2 naming file and line
    done_ok = _first_per_key([ln for ln in previous if ln["outcome"] != "error"])
    if len(done_ok) != len(previous):
        # One line per question: an error line is replaced by the retry's outcome, so it goes before the retry.
        rundir.rewrite(graded, done_ok)
    done_keys = {_key(ln) for ln in done_ok}
    todo = [(it, k) for k in range(sampling.repeats) for it in items if (it.qid, k) not in done_keys]
    wanted = {(it.qid, k) for it in items for k in range(sampling.repeats)}
    progress = _Progress(len(wanted), [ln for ln in done_ok if (ln["id"], int(ln.get("repeat") or 0)) in wanted])
    slots = asyncio.Semaphore(max(1, concurrency))
    pool = ThreadPoolExecutor(GRADING_WORKERS, thread_name_prefix="grade")
    loop = asyncio.get_running_loop()

    async def one(item: DatasetItem, repeat: int) -> None:
        prompt = render_prompt(item)
        tags: dict[str, Any] = {"qid": item.qid, "dataset": item.dataset, **(pass_tags or {})}
        if sampling.repeats > 1:
            tags["repeat"] = repeat
        req = ChatRequest(
            messages=build_messages(prompt, system_prompt),
            max_tokens=max_tokens,
            temperature=sampling.temperature,
            extra_body={**extra_body, **sampling.seed_body(repeat)},
            request_id=new_request_id("cap"),
            tags=tags,
            timeout_s=sampling.timeout_s,
        )
        async with slots:
            rec = await client.chat(req)
        rundir.append("requests.jsonl", rec.to_json())
        if rec.status != "ok":
            verdict = Verdict("error", None, f"request {rec.status}: {rec.error}", rule="request.error")
        else:
            verdict = await loop.run_in_executor(pool, grader.grade, item, rec.content, rec.finish_reason)
        line = graded_line(
            item,
            verdict,
            revisions.get(item.dataset),
            request_id=rec.request_id,
            **({"repeat": repeat} if sampling.repeats > 1 else {}),
            finish_reason=rec.finish_reason,
            thinking=bool(rec.reasoning or inline_reasoning(rec.content)),
            **token_counts(rec.content, rec.reasoning, rec.content_chunks, rec.reasoning_chunks),
            prompt=prompt,
            content=rec.content,
            reasoning=rec.reasoning,
        )
        rundir.append(graded, line)
        progress.add(verdict.correct)

    try:
        await asyncio.gather(*(one(it, k) for it, k in todo))
    finally:
        progress.close()
        pool.shutdown(wait=True)


def read_replay(path: Path) -> list[dict[str, Any]]:
    """The replay file's lines (contract: id, content, reasoning); a malformed line is a usage error."""
    if not path.exists():
        raise UsageError(f"replay file not found: {path}")
    if path.is_dir():
        raise UsageError(f"replay file {path} is a directory")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read ({e.strerror or e})") from None
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            raise UsageError(f"{path}:{n}: not a JSON object") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or not isinstance(obj.get("content"), str):
            raise UsageError(f"{path}:{n}: needs a string 'id' and a string 'content'")
        validate(ReplayLine, obj, f"{path}:{n}")
        out.append(obj)
    if not out:
        raise UsageError(f"{path}: the replay file holds no answers")
    return out


def run_replay(
    rundir: RunDir,
    answers: list[dict[str, Any]],
    items: dict[str, DatasetItem],
    grader: Grader,
    revisions: dict[str, str],
    render: Callable[[DatasetItem], str] = render_prompt,
) -> list[dict[str, Any]]:
    """Grade each recorded answer; one `graded.jsonl` line per input line, in input order."""
    progress = _Progress(len(answers), [])

    def one(ans: dict[str, Any]) -> dict[str, Any]:
        item = items.get(ans["id"])
        if item is None:
            return {
                "id": ans["id"],
                "dataset": ans["id"].split(":", 1)[0],
                "correct": False,
                "outcome": "error",
                "extracted": None,
                "why": "unknown question id",
                "rule": "replay.unknown_id",
                "ambiguous": False,
            }
        verdict = grader.grade(item, ans["content"], ans.get("finish_reason"))
        return graded_line(
            item,
            verdict,
            revisions.get(item.dataset),
            finish_reason=ans.get("finish_reason"),
            thinking=bool(ans.get("reasoning") or inline_reasoning(ans["content"])),
            prompt=render(item),
            content=ans["content"],
            reasoning=ans.get("reasoning"),
        )

    lines = []
    try:
        with ThreadPoolExecutor(GRADING_WORKERS, thread_name_prefix="grade") as pool:
            for line in pool.map(one, answers):
                rundir.append(GRADED, line)
                lines.append(line)
                progress.add(line["correct"])
    finally:
        progress.close()
    return lines
