"""A second opinion where the rules are unsure: a judge model asked, as simple-evals' equality checker asks, whether
an answer's final value is equivalent to the reference (`prompts/judge-equality.txt`).

Only lines the rules could not grade with confidence go to the judge: unsure (`sure: false`, issue #55), `ambiguous`
(two readings disagree) or `unparsed` (nothing read). The judge's verdict (`correct`, `wrong`, `unsure`, or `error`
when it could not be asked) and its words are stored beside the rule's grade as `judge` in `graded.jsonl`; `correct`
and `outcome` stay the rules', and a judge's `correct` or `wrong` on an unsure line settles it (`settles: true`): the
sure score (`sure_correct`, the interval) counts the line by the judge's verdict. Items graded by running code
(HumanEval+) have no value to compare and are never sent. The judge's key is sent in its Authorization header only;
the client scrubs it from every error text it keeps.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib.resources import files
from typing import TYPE_CHECKING, TypedDict

from evalkit.client.thinking_text import split_inline_reasoning
from evalkit.errors import UsageError
from evalkit.redact import scrub
from evalkit.runs.schemas import JUDGE_VERDICTS, GradedLine
from evalkit_evals import registry
from evalkit_evals.datasets import DatasetItem

if TYPE_CHECKING:  # the client is imported when a judge is opened: the report and the sim read lines only
    from evalkit.client.chat import ChatClient

VERDICTS = JUDGE_VERDICTS
# Room for a reasoning judge to think before its one word; its words are kept whole in graded.jsonl.
MAX_TOKENS = 4096
# A reply's whole time (issue #56: a judge that never finished cost 300 s a line): once one reply has not come
# whole within it, the judge is asked nothing more in the run (each later line `error`, "not asked").
TIMEOUT_S = 120.0
# The judge's words kept in graded.jsonl (a 100 MB reply was stored whole): the start and the end, the cut said.
MAX_WORDS_CHARS = 4000
# The response's tail is what states its final answer; a long derivation is cut from the front.
RESPONSE_CHARS = 6000
_FIELD = re.compile(r"\{(reference|response)\}")
_REFERENCE = re.compile(r"<reference>\n(.*?)\n</reference>", re.DOTALL)
_RESPONSE = re.compile(r"<response>\n(.*)\n</response>\s*\Z", re.DOTALL)
_WORD = re.compile(r"[a-z]+")
_WORDS = {"yes": "correct", "no": "wrong", "unsure": "unsure"}


@functools.cache
def extract_template() -> str:
    """The extraction prompt (`prompts/extract-answer.txt`, `--judge-self`), with `{response}` to fill."""
    return (files("evalkit_prompts") / "extract-answer.txt").read_text(encoding="utf-8")


def extract_prompt(response: str) -> str:
    """The fixed prompt asking a model for a response's final answer (its last `RESPONSE_CHARS` characters)."""
    if len(response) > RESPONSE_CHARS:
        response = "[...] " + response[-RESPONSE_CHARS:]
    return extract_template().replace("{response}", response.strip(), 1)


def parse_extract_prompt(text: str) -> str | None:
    """The response of a prompt `extract_prompt` wrote, or None for any other text (the sim's extractor)."""
    if not text.startswith(extract_template().split("\n", 1)[0]):
        return None
    resp = _RESPONSE.search(text)
    return resp.group(1) if resp else None


def extracted_answer(words: str) -> str | None:
    """The answer an extractor wrote (after any reasoning), or None for NONE or nothing."""
    _, answer = split_inline_reasoning(words or "")
    answer = answer.strip().strip("`").strip()
    return None if not answer or answer.upper().rstrip(".") == "NONE" else answer


@functools.cache  # read once: the sim checks every prompt it is sent against its first line
def template() -> str:
    """The judge's prompt (`prompts/judge-equality.txt`), with `{reference}` and `{response}` to fill."""
    return (files("evalkit_prompts") / "judge-equality.txt").read_text(encoding="utf-8")


def judge_prompt(reference: str, response: str) -> str:
    """The prompt for one answer; the response is cut to its last `RESPONSE_CHARS` characters."""
    if len(response) > RESPONSE_CHARS:
        response = "[...] " + response[-RESPONSE_CHARS:]
    values = {"reference": reference.strip(), "response": response.strip()}
    # One pass, so text inside one value is never taken for the other's placeholder.
    return _FIELD.sub(lambda m: values[m.group(1)], template())


def parse_judge_prompt(text: str) -> tuple[str, str] | None:
    """(reference, response) of a prompt `judge_prompt` wrote, or None for any other text (the sim's judge)."""
    head = template().split("{reference}", 1)[0].split("\n", 1)[0]
    if not text.startswith(head):
        return None
    ref, resp = _REFERENCE.search(text), _RESPONSE.search(text)
    if ref is None or resp is None:
        return None
    return ref.group(1), resp.group(1)


def read_verdict(words: str) -> str:
    """`correct`, `wrong` or `unsure` from the judge's words (after any reasoning): its first word, Yes/No/Unsure;
    anything else is `unsure` (the words are kept for a person to read)."""
    _, answer = split_inline_reasoning(words or "")
    m = _WORD.search(answer.lower())
    return _WORDS.get(m.group(0), "unsure") if m else "unsure"


def kept_words(words: str) -> str:
    """The judge's words as graded.jsonl keeps them: whole up to MAX_WORDS_CHARS, else its start and its end."""
    if len(words) <= MAX_WORDS_CHARS:
        return words
    head, tail = MAX_WORDS_CHARS // 4, MAX_WORDS_CHARS // 2
    return f"{words[:head]} […{len(words) - head - tail} characters cut…] {words[-tail:]}"


def reference_answer(item: DatasetItem) -> str | None:
    """The gold as the judge is shown it; None for an item with nothing to compare (code run by tests)."""
    row = item.row
    if item.dataset == "gsm8k":
        return str(row["answer"]).split("####")[-1].strip()
    if item.dataset == "math500":
        return str(row["answer"]).strip()
    if item.dataset == "musr":
        from evalkit_evals.musr import EVAL as MUSR
        from evalkit_evals.musr import musr_choices

        k = int(row["answer_index"])
        return f"{k + 1} ({musr_choices(MUSR.row(item))[k].strip()})"
    ev = registry.get(item.dataset)
    spec = getattr(ev, "spec", None)  # a user eval: its gold column, unless it is code run by tests
    if ev.runs_code or spec is None or spec.extract.kind == "code":
        return None
    return str(row[spec.answer]).strip()


def needs_judge(line: GradedLine) -> bool:
    """True for a line the rules could not grade with confidence: unsure (issue #55), ambiguous, or unparsed."""
    return line.sure is False or bool(line.ambiguous) or line.outcome == "unparsed"


class JudgeJson(TypedDict, total=False):
    """The `judge` field of a `graded.jsonl` line (`JudgeVerdict.to_json`; read as `schemas.JudgeOpinion`)."""

    model: str
    verdict: str
    words: str
    request_id: str | None
    extractor: bool
    settles: bool  # issue #55: set by the runner where the verdict settles an unsure grade


class JudgeManifest(TypedDict, total=False):
    """What a run records of its judge (`JudgeSettings.manifest`)."""

    base_url: str
    model: str
    prompt: str
    extractor: bool


class JudgeCountsJson(TypedDict):
    """A capability summary's `judge` (`judge_counts`; read as `schemas.JudgeCounts`)."""

    sent: int
    verdicts: dict[str, int]
    disagree: int
    judge_right_rules_not: int
    rules_right_judge_not: int
    models: list[str]


@dataclass(frozen=True)
class JudgeVerdict:
    """What the judge said about one answer: its model, verdict (one of VERDICTS), words, and request id."""

    model: str
    verdict: str
    words: str
    request_id: str | None
    extractor: bool = False  # the served model read the answer (`--judge-self`); evalkit's rules graded what it read

    def to_json(self) -> JudgeJson:
        """The `judge` field of a `graded.jsonl` line."""
        out: JudgeJson = {
            "model": self.model,
            "verdict": self.verdict,
            "words": self.words,
            "request_id": self.request_id,
        }
        if self.extractor:
            out["extractor"] = True
        return out


@dataclass(frozen=True)
class JudgeSettings:
    """Where the judge is: an OpenAI-compatible base URL, a model, and the key (never shown, never written)."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False, compare=False)
    extract: bool = False  # `--judge-self`: the served model as the extractor, evalkit's rules grade what it reads

    def manifest(self) -> JudgeManifest:
        """What the run records of its judge (never the key)."""
        if self.extract:
            return {"base_url": self.base_url, "model": self.model, "prompt": "extract-answer.txt", "extractor": True}
        return {"base_url": self.base_url, "model": self.model, "prompt": "judge-equality.txt"}


class ModelJudge:
    """Asks one judge server about answers; open it with `connect`, close it with `aclose`."""

    def __init__(self, settings: JudgeSettings, client: ChatClient, concurrency: int = 4) -> None:
        self.settings = settings
        self.client = client
        self._slots = asyncio.Semaphore(max(1, concurrency))  # answers may arrive faster than the judge reads them
        self._gave_up: str | None = None  # why the judge is asked nothing more (a reply past TIMEOUT_S)

    @classmethod
    async def connect(cls, settings: JudgeSettings, concurrency: int = 4) -> ModelJudge:
        """Check that the judge answers `GET /models` (one line, exit 2, before any grading when it does not)."""
        from evalkit.client.chat import ChatClient
        from evalkit.config.profiles import ServerProfile
        from evalkit.session.connect import discover_model

        profile = ServerProfile(base_url=settings.base_url, model=settings.model or None, api_key=settings.api_key)
        try:
            model = await discover_model(profile)
        except UsageError as e:
            flag = "--judge-self" if settings.extract else "--judge-url"
            raise UsageError(f"{flag}: {scrub(str(e), [settings.api_key])}") from None
        if not settings.model:  # --judge-self on a server whose model was not named: the one it serves
            settings = replace(settings, model=model)
        return cls(settings, ChatClient(settings.base_url, settings.model, api_key=settings.api_key), concurrency)

    async def ask(
        self, item: DatasetItem, content: str, grade: Callable[[str], bool] | None = None
    ) -> JudgeVerdict | None:
        """The judge's verdict on one answer (its text after any reasoning); None when the item has no reference.
        As an extractor (`settings.extract`) the model is asked for the final answer with the fixed extraction
        prompt and `grade` (the rules on "Final answer: X") turns what it read into the verdict."""
        from evalkit.client.chat import ChatRequest, new_request_id

        reference = reference_answer(item)
        if reference is None:
            return None
        _, answer = split_inline_reasoning(content or "")
        prompt = extract_prompt(answer) if self.settings.extract else judge_prompt(reference, answer)
        req = ChatRequest(
            messages=[{"role": "user", "content": prompt}],
            max_tokens=MAX_TOKENS,
            temperature=0.0,
            request_id=new_request_id("judge"),
            timeout_s=TIMEOUT_S,
            tags={"qid": item.qid, "judge": True},
        )
        async with self._slots:
            if self._gave_up is not None:
                return JudgeVerdict(self.settings.model, "error", f"not asked: {self._gave_up}", None)
            rec = await self.client.chat(req)
        if rec.status == "timeout" and self._gave_up is None:
            self._gave_up = f"the judge's reply about {item.qid} did not end within {TIMEOUT_S:g} s"
        extractor = self.settings.extract
        if rec.status != "ok":
            why = scrub(f"judge request {rec.status}: {rec.error}", [self.settings.api_key])
            return JudgeVerdict(self.settings.model, "error", kept_words(why), rec.request_id, extractor)
        if extractor:
            read = extracted_answer(rec.content)
            verdict = "unsure" if read is None or grade is None else "correct" if grade(read) else "wrong"
            return JudgeVerdict(self.settings.model, verdict, kept_words(rec.content), rec.request_id, True)
        return JudgeVerdict(self.settings.model, read_verdict(rec.content), kept_words(rec.content), rec.request_id)

    async def aclose(self) -> None:
        """Close the judge's connections."""
        await self.client.aclose()


def disagrees(line: GradedLine) -> bool:
    """True when the judge gave a verdict (correct or wrong) other than the rule's grade."""
    verdict = line.judge.verdict if line.judge else None
    return verdict in ("correct", "wrong") and (verdict == "correct") != line.correct


def judge_counts(lines: Sequence[GradedLine]) -> JudgeCountsJson | None:
    """The summary's `judge` entry: lines sent, each verdict's count, and disagreements with the rules (those the
    judge calls right that the rules did not, and the reverse); None when no line carries a judge verdict."""
    judged = [(ln, ln.judge) for ln in lines if ln.judge is not None]
    if not judged:
        return None
    verdicts = {v: sum(1 for _, j in judged if j.verdict == v) for v in VERDICTS}
    return {
        "sent": len(judged),
        "verdicts": verdicts,
        "disagree": sum(1 for ln, _ in judged if disagrees(ln)),
        "judge_right_rules_not": sum(1 for ln, _ in judged if disagrees(ln) and not ln.correct),
        "rules_right_judge_not": sum(1 for ln, _ in judged if disagrees(ln) and ln.correct),
        "models": sorted({j.model for _, j in judged}),
    }


def describe_counts(counts: JudgeCountsJson, lines: int) -> str:
    """One line for the end of a run: how many lines were sent, and how often the judge disagreed."""
    v = counts["verdicts"]
    return (
        f"judge {', '.join(counts['models'])}: asked about {counts['sent']} of {lines} lines (unsure grades); "
        f"disagrees with the rules on {counts['disagree']} ({counts['judge_right_rules_not']} it calls right, "
        f"{counts['rules_right_judge_not']} it calls wrong); {v['unsure']} unsure, {v['error']} failed; "
        "`correct` stays the rules', the sure score counts what it settled"
    )
