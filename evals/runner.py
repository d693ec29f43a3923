"""Asking and grading: the live run against a server, and the replay of recorded answers without one.

Requests go out `concurrency` at a time; each answer is graded in a worker thread as soon as it arrives (two
gradings at a time: the sandbox and math-verify are CPU-bound and the machine may have two cores) and its line
is appended to `graded.jsonl` at once, so a killed run loses nothing and resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from evalkit.client.chat import ChatClient, ChatRequest, new_request_id
from evalkit.config.profiles import ThinkingBody
from evalkit.errors import UsageError
from evalkit.progress import Progress
from evalkit.runs.rundir import RunDir, read_jsonl, read_records
from evalkit.runs.schemas import GradedLine, ReplayLine, validate
from evalkit_evals import registry
from evalkit_evals.datasets import DatasetItem
from evalkit_evals.grader import Grader, graded_line, inline_reasoning, token_counts
from evalkit_evals.model_judge import JudgeJson, ModelJudge, needs_judge
from evalkit_evals.prompting import build_messages, render_prompt
from evalkit_evals.question_scores import graded_lines, sample_key
from evalkit_evals.verdict import Verdict

GRADED = "graded.jsonl"
GRADING_WORKERS = 2


@dataclass(frozen=True)
class Sampling:
    """How each question is asked: `repeats` times at `temperature`; repeat k sends `seed` k when sampling."""

    repeats: int = 1
    temperature: float = 0.0
    timeout_s: float = 900.0  # per request (`--timeout-s`)

    def seed_body(self, repeat: int) -> dict[str, int]:
        """The per-repeat `seed`, so a sampled run can be asked again alike (greedy runs send none)."""
        return {"seed": repeat} if self.temperature > 0 else {}


class _Progress:
    """tqdm on stderr with the running accuracy."""

    def __init__(self, total: int, done: list[GradedLine]) -> None:
        self.correct = sum(1 for d in done if d.correct)
        self.seen = len(done)
        # A bar on a terminal; in a log, a line at least every 25 s (evalkit.progress).
        self.bar = Progress(total, "capability", "questions", initial=len(done))
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


def _first_per_key(lines: list[GradedLine]) -> list[int]:
    """The places of the first line of each (id, repeat) that is not an `error`."""
    seen: set[tuple[str, int]] = set()
    out = []
    for k, ln in enumerate(lines):
        if ln.outcome != "error" and sample_key(ln) not in seen:
            seen.add(sample_key(ln))
            out.append(k)
    return out


async def run_live(
    rundir: RunDir,
    client: ChatClient,
    items: list[DatasetItem],
    grader: Grader,
    revisions: dict[str, str],
    extra_body: ThinkingBody,  # what each request adds over the client's standing body (thinking)
    system_prompt: str | None,
    max_tokens: int,
    concurrency: int,
    sampling: Sampling = Sampling(),
    graded: str = GRADED,
    pass_tags: dict[str, str] | None = None,
    judge: ModelJudge | None = None,
) -> None:
    """Ask every (item, repeat) not yet graded in this run directory, grade each answer and append its line.

    `graded` names the file (`--under-load` keeps its idle pass in another), `pass_tags` label its request lines;
    with a `judge`, a line the rules are unsure of also carries the judge's verdict."""
    previous = read_jsonl(rundir.path / graded, GradedLine)  # a bad line exits 2 naming file and line
    records = graded_lines(previous)
    keep = _first_per_key(records)
    if len(keep) != len(previous):
        # One line per question: an error line is replaced by the retry's outcome, so it goes before the retry.
        rundir.rewrite(graded, [previous[k] for k in keep])
    done_ok = [records[k] for k in keep]
    done_keys = {sample_key(ln) for ln in done_ok}
    todo = [(it, k) for k in range(sampling.repeats) for it in items if (it.qid, k) not in done_keys]
    wanted = {(it.qid, k) for it in items for k in range(sampling.repeats)}
    progress = _Progress(len(wanted), [ln for ln in done_ok if sample_key(ln) in wanted])
    slots = asyncio.Semaphore(max(1, concurrency))
    pool = ThreadPoolExecutor(GRADING_WORKERS, thread_name_prefix="grade")
    loop = asyncio.get_running_loop()

    async def one(item: DatasetItem, repeat: int) -> None:
        prompt = render_prompt(item)
        tags: dict[str, str | int] = {"qid": item.qid, "dataset": item.dataset, **(pass_tags or {})}
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
        _write(rundir, graded, line, await _second_opinion(judge, item, rec.content, line, grader))
        progress.add(verdict.correct)

    try:
        await asyncio.gather(*(one(it, k) for it, k in todo))
    finally:
        progress.close()
        pool.shutdown(wait=True)


async def _second_opinion(
    judge: ModelJudge | None, item: DatasetItem, content: str, line: GradedLine, grader: Grader
) -> JudgeJson | None:
    """The judge's verdict on a line the rules are unsure of, its `judge` (never touching the rule's grade); an
    extractor's reading (`--judge-self`) is graded by the rules as "Final answer: X". None: the judge was not
    asked, or had nothing to compare with."""
    if judge is None or not needs_judge(line):
        return None
    verdict = await judge.ask(item, content, lambda read: grader.grade(item, f"Final answer: {read}").correct)
    if verdict is None:
        return None
    opinion = verdict.to_json()
    if line.sure is False and verdict.verdict in ("correct", "wrong"):
        opinion["settles"] = True  # issue #55: the judge's reading settles an unsure grade
    return opinion


def _write(rundir: RunDir, graded: str, line: GradedLine, opinion: JudgeJson | None) -> GradedLine:
    """Append the line to `graded` with the judge's opinion, where there is one, last; the line as the file now
    holds it."""
    out = line.to_json()
    if opinion is not None:
        out["judge"] = opinion
    rundir.append(graded, out)
    return GradedLine.model_validate(out)


@dataclass(frozen=True)
class ReplayAnswer:
    """One recorded answer of a replay file: its 1-based line number there, and the line (contract fields)."""

    line: int
    record: ReplayLine

    @property
    def qid(self) -> str:
        """The question id it answers."""
        return self.record.id


def read_replay(path: Path) -> list[ReplayAnswer]:
    """The replay file's answers (contract: id, content, reasoning); a malformed line is a usage error."""
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
    # JSON Lines end at "\n" alone: str.splitlines would also break at U+2028, U+0085 ... inside a JSON string.
    for n, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            raise UsageError(f"{path}:{n}: not a JSON object") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or not isinstance(obj.get("content"), str):
            raise UsageError(f"{path}:{n}: needs a string 'id' and a string 'content'")
        out.append(ReplayAnswer(n, cast(ReplayLine, validate(ReplayLine, obj, f"{path}:{n}"))))
    if not out:
        raise UsageError(f"{path}: the replay file holds no answers")
    return out


def check_replay_datasets(path: Path, answers: list[ReplayAnswer]) -> None:
    """Exit 2 at the first answer whose id names no registered dataset (nothing could grade it)."""
    known = registry.names()
    for ans in answers:
        dataset = ans.qid.split(":", 1)[0]
        if ":" not in ans.qid or dataset not in known:
            raise UsageError(
                f"{path}:{ans.line}: id {ans.qid!r} names no known dataset (ids are <dataset>:<id>; "
                f"known: {', '.join(known)})"
            )


def check_replay_ids(path: Path, answers: list[ReplayAnswer], items: dict[str, DatasetItem]) -> None:
    """Exit 2 at the first answer whose id is not a question of its dataset."""
    for ans in answers:
        if ans.qid not in items:
            raise UsageError(f"{path}:{ans.line}: no question {ans.qid!r} in {ans.qid.split(':', 1)[0]}")


def _graded_before(rundir: RunDir, answers: list[ReplayAnswer]) -> list[GradedLine]:
    """The lines a stopped replay of the same file already wrote (a prefix of its answers, in order)."""
    previous = read_records(rundir.path / GRADED, GradedLine)
    for k, ln in enumerate(previous):
        if k >= len(answers) or ln.id != answers[k].qid or ln.replay_line != answers[k].line:
            raise UsageError(
                f"{rundir.path / GRADED} line {k + 1} is not the grade of this file's answer at that place; "
                "pick a new --name"
            )
    return previous


async def run_replay(
    rundir: RunDir,
    answers: list[ReplayAnswer],
    items: dict[str, DatasetItem],
    grader: Grader,
    revisions: dict[str, str],
    judge: ModelJudge | None = None,
    render: Callable[[DatasetItem], str] = render_prompt,
) -> list[GradedLine]:
    """Grade each recorded answer as its own case (several may answer one question): one `graded.jsonl` line per
    input line, in input order, each naming its `replay_line`; the lines as read back. A stopped replay resumes
    after its last line."""
    previous = _graded_before(rundir, answers)
    todo = answers[len(previous) :]
    progress = _Progress(len(answers), previous)
    pool = ThreadPoolExecutor(GRADING_WORKERS, thread_name_prefix="grade")
    loop = asyncio.get_running_loop()

    async def one(ans: ReplayAnswer) -> tuple[GradedLine, JudgeJson | None]:
        item, rec = items[ans.qid], ans.record
        verdict = await loop.run_in_executor(pool, grader.grade, item, rec.content, rec.finish_reason)
        line = graded_line(
            item,
            verdict,
            revisions.get(item.dataset),
            replay_line=ans.line,
            finish_reason=rec.finish_reason,
            thinking=bool(rec.reasoning or inline_reasoning(rec.content)),
            prompt=render(item),
            content=rec.content,
            reasoning=rec.reasoning,
        )
        return line, await _second_opinion(judge, item, rec.content, line, grader)

    tasks = [asyncio.ensure_future(one(a)) for a in todo]
    lines = list(previous)
    try:
        for task in tasks:  # graded two at a time, written in input order
            line, opinion = await task
            lines.append(_write(rundir, GRADED, line, opinion))
            progress.add(line.correct)
    finally:
        for task in tasks:
            task.cancel()
        progress.close()
        pool.shutdown(wait=True, cancel_futures=True)
    return lines
