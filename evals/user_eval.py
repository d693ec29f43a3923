r"""User evals without code: a TOML file declares the dataset, the prompt, how the answer is read and how it is scored.

```toml
name = "capitals"                  # the `dataset` field and the question-id prefix (`capitals:<id>`)
prompt = '''What is the capital of {{ country }}? End with "Answer: CITY".'''   # Jinja; the row's columns
answer = "capital"                 # the column holding the gold answer

[dataset]
path = "capitals.jsonl"            # .jsonl, .csv or .parquet (read with pandas), relative to this file
id_column = "id"                   # optional: ids from a column, else the row index
# or: hub = "org/name", revision = "<40-hex commit>", split = "test", config = "..."  (the `datasets` package)

[extract]
kind = "regex"                     # number | choice | math | code | regex
pattern = 'Answer:\s*(.+)'         # regex: the last match, its first group (or the whole match); 2 s per answer
# choices = "options"              # choice: the column listing the choices (a list, or a list literal)

[score]
kind = "exact"                     # exact | numeric | math | choice | tests (defaults by extractor)
ignore_case = true                 # exact: compare without case

[sim]                              # optional: how `evalkit sim --eval FILE` answers
answer = "The capital is {{ answer }}.\nAnswer: {{ answer }}"
```

Extractors reuse the built-ins' readers: `number` is GSM8K's final-number reading, `choice` MuSR's, `math`
MATH-500's (boxed, else stated, judged by math-verify), `code` the last fenced python block (else the answer).
A `tests` score calls `entry_point` (a column, or `[score] entry_point`) on each `[input, expected]` pair of the
`tests` column in the run's code sandbox. The file is validated by `UserEvalFile` (unknown keys are errors).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
import time
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import jinja2
import regex
from pydantic import field_validator, model_validator

from evalkit.config.profiles import read_toml
from evalkit.errors import UsageError
from evalkit.runs.schemas import ClosedModel, GradedLine, validate
from evalkit_evals.datasets import DatasetItem, HubSource, SourceRevision, read_hub
from evalkit_evals.prompting import template_environment
from evalkit_evals.protocol import Judges, ScoreExtra
from evalkit_evals.sample_answers import WRONG_MATH, plus_one
from evalkit_evals.template_budget import check_renders, describe
from evalkit_evals.verdict import Verdict

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
DEFAULT_SCORE = {"number": "numeric", "choice": "choice", "math": "math", "code": "exact", "regex": "exact"}
ALLOWED_SCORES = {
    "number": ("numeric", "exact"),
    "choice": ("choice",),
    "math": ("math",),
    "code": ("exact", "tests"),
    "regex": ("exact", "numeric", "math"),
}
WRONG_TEXT = "evalkit-sim-wrong-answer"
# A user's pattern may backtrack for ever (`(a+)+$` on "aaa...b"): the `regex` module stops it after this long, and
# that answer grades `error` with the reason; the run goes on (and Ctrl-C waits at most this long).
REGEX_TIMEOUT_S = 2.0
_CALL_S = 10.0  # a `tests` score's limit per call; the answer as a whole has the sandbox's wall_s


class DatasetTable(ClosedModel):
    """Where the rows are: a local file, or a Hub dataset at a pinned commit."""

    path: str | None = None
    hub: str | None = None
    revision: str | None = None
    split: str = "test"
    config: str | None = None
    id_column: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> DatasetTable:
        if (self.path is None) == (self.hub is None):
            raise ValueError("give exactly one of 'path' (a local file) and 'hub' (a Hub dataset)")
        if self.hub is not None and (self.revision is None or not _COMMIT.match(self.revision)):
            raise ValueError("a Hub dataset needs 'revision', the 40-hex commit it is pinned at")
        if self.path is not None and Path(self.path).suffix.lower() not in (".jsonl", ".csv", ".parquet"):
            raise ValueError(f"'path' must end in .jsonl, .csv or .parquet (found {self.path!r})")
        return self


class ExtractTable(ClosedModel):
    """How the final answer is read out of the reply."""

    kind: Literal["number", "choice", "math", "code", "regex"]
    pattern: str | None = None
    choices: str | None = None

    @model_validator(mode="after")
    def _needs(self) -> ExtractTable:
        if self.kind == "regex":
            if not self.pattern:
                raise ValueError("a regex extractor needs 'pattern'")
            try:
                regex.compile(self.pattern)
            except regex.error as e:
                raise ValueError(f"'pattern' is not a regular expression ({e})") from None
        elif self.pattern is not None:
            raise ValueError("'pattern' is for the regex extractor only")
        if (self.kind == "choice") != (self.choices is not None):
            raise ValueError("the choice extractor, and only it, needs 'choices' (the column listing them)")
        return self


class ScoreTable(ClosedModel):
    """How the read answer is compared with the gold."""

    kind: Literal["exact", "numeric", "math", "choice", "tests"] | None = None
    ignore_case: bool = False
    tolerance: float = 0.0
    entry_point: str | None = None

    @field_validator("tolerance")
    @classmethod
    def _tol(cls, v: float) -> float:
        if not math.isfinite(v) or v < 0:
            raise ValueError("must be a finite number >= 0")
        return v


class SimTable(ClosedModel):
    """How the sim answers (a Jinja template; `answer` is the right or the wrong value)."""

    answer: str | None = None


class UserEvalFile(ClosedModel):
    """A user eval file (`evalkit capability --eval FILE`)."""

    name: str
    description: str | None = None
    prompt: str
    answer: str
    dataset: DatasetTable
    extract: ExtractTable
    score: ScoreTable = ScoreTable()
    sim: SimTable = SimTable()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("must be lower-case letters, digits, '_' or '-' (it prefixes question ids)")
        return v

    @model_validator(mode="after")
    def _pairs(self) -> UserEvalFile:
        kind = self.score.kind or DEFAULT_SCORE[self.extract.kind]
        if kind not in ALLOWED_SCORES[self.extract.kind]:
            raise ValueError(
                f"a {self.extract.kind} extractor scores with "
                f"{' or '.join(ALLOWED_SCORES[self.extract.kind])}, not {kind}"
            )
        return self


def _native(v: Any) -> Any:
    """pandas/numpy values as plain JSON values (NaN is None), so row hashes and templates see what the file says."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        return _native(v.tolist())
    if isinstance(v, list):
        return [_native(x) for x in v]
    if isinstance(v, dict):
        return {k: _native(x) for k, x in v.items()}
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8")  # a Parquet binary column of text; other bytes raise UnicodeDecodeError
    if hasattr(v, "item") and not isinstance(v, str):
        return v.item()
    return v


def read_table(path: Path) -> list[dict[str, Any]]:
    """A JSONL, CSV (every cell a string) or Parquet file's rows with pandas; a bad file is one line."""
    import pandas as pd

    if not path.exists():
        raise UsageError(f"dataset file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            df = pd.read_json(path, lines=True, dtype=False)
        elif suffix == ".csv":
            df = pd.read_csv(path, dtype=str, keep_default_na=False)
        else:
            try:
                import pyarrow  # noqa: F401 - pandas reads Parquet through it
            except ImportError:
                raise UsageError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
            df = pd.read_parquet(path)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - any parse failure is the file's, told in one line
        raise UsageError(f"{path}: cannot read as {suffix[1:]}: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    rows = []
    for n, rec in enumerate(df.to_dict(orient="records")):
        row = {}
        for k, v in rec.items():
            try:
                row[str(k)] = _native(v)
            except UnicodeDecodeError:
                raise UsageError(f"{path}: row {n}, column {k!r}: binary data, not text") from None
        rows.append(row)
    return rows


def _choices(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise ValueError(f"choices {value[:60]!r} are neither a list nor a list literal") from None
    return [str(c) for c in value]


def _decimal(text: str) -> Decimal | None:
    from evalkit_evals.gsm8k import to_decimal

    return to_decimal(str(text).strip())


def _fmt(value: Decimal) -> str:
    return format(value.normalize(), "f") if value == value.to_integral() else str(value)


def _last_fenced(answer: str) -> str | None:
    blocks = [m.group(2) for m in _FENCE.finditer(answer) if m.group(1).lower() in ("", "python", "py", "python3")]
    if blocks:
        return blocks[-1].strip("\n")
    return answer.strip() or None


@dataclass(frozen=True)
class UserEval:
    """A user eval file as an `Eval` (see `protocol.Eval`)."""

    spec: UserEvalFile
    file: Path
    sha256: str
    runs_code: bool = False
    _env: jinja2.Environment = field(default_factory=template_environment, compare=False)

    @property
    def name(self) -> str:
        """The dataset name."""
        return self.spec.name

    @property
    def score_kind(self) -> str:
        """The scorer, after the extractor's default."""
        return self.spec.score.kind or DEFAULT_SCORE[self.spec.extract.kind]

    # --- what is asked ---------------------------------------------------------------------------------------
    def _source_path(self) -> Path:
        assert self.spec.dataset.path is not None
        p = Path(self.spec.dataset.path)
        return p if p.is_absolute() else self.file.parent / p

    def _rows(self) -> list[dict[str, Any]]:
        d = self.spec.dataset
        if d.path is not None:
            return read_table(self._source_path())
        assert d.hub is not None
        return read_hub(HubSource(d.hub, d.config, d.split, d.revision, ""))

    def load(self, data_dir: str | Path | None) -> list[DatasetItem]:
        """Every row, with ids `<name>:<id column or row index>`; the first row's prompt is rendered to check the
        template's variables."""
        rows = self._rows()
        col, split = self.spec.dataset.id_column, self.spec.dataset.split if self.spec.dataset.hub else "file"
        for n, r in enumerate(rows):
            if self.spec.answer not in r or (col is not None and col not in r):
                missing = self.spec.answer if self.spec.answer not in r else col
                raise UsageError(f"{self.file}: row {n} has no column {missing!r}")
        items = [DatasetItem(f"{self.name}:{r[col] if col else i}", self.name, split, i, r) for i, r in enumerate(rows)]
        seen: set[str] = set()
        for it in items:
            if it.qid in seen:
                raise UsageError(f"{self.file}: question id {it.qid} appears twice (column {col!r})")
            seen.add(it.qid)
        if not items:
            raise UsageError(f"{self.file}: the dataset has no rows")
        # Every row's prompt (and sim answer) rendered once here, within the template budget (template_budget.py):
        # a template that misbehaves, or only on some row, stops the run before its first request, in one line.
        renders: list[tuple[str, str, DatasetItem]] = [("prompt", self.spec.prompt, it) for it in items]
        if self.spec.sim.answer is not None:
            renders += [("[sim] answer", self.spec.sim.answer, it) for it in items]
        gold = self.spec.answer
        failed = check_renders(
            [
                (src, self.prompt_fields(it.row) if what == "prompt" else {**it.row, "answer": it.row[gold]})
                for what, src, it in renders
            ]
        )
        if failed is not None:
            n, why = failed
            what, _, it = renders[min(n, len(renders) - 1)]
            raise UsageError(f"{self.file}: {what}: {why} (question {it.qid})")
        return items

    def _render(self, what: str, source: str, fields: dict[str, Any]) -> str:
        """`source` rendered in the sandbox; a refused or undefined name is one line (UsageError)."""
        try:
            return self._env.from_string(source).render(**fields)
        except jinja2.UndefinedError as e:
            raise UsageError(f"{self.file}: {what}: {e.message} (the row's columns: {', '.join(fields)})") from None
        except jinja2.TemplateError as e:  # SecurityError among them: the sandbox refused an attribute or call
            raise UsageError(f"{self.file}: {what}: {' '.join(str(e).split())[:200]}") from None
        except (ArithmeticError, ValueError, TypeError, LookupError, RecursionError, MemoryError) as e:
            raise UsageError(f"{self.file}: {what}: {describe(e)}") from None

    def revision(self, data_dir: str | Path | None) -> dict[str, SourceRevision]:
        """The local file's sha256, or the Hub commit."""
        d = self.spec.dataset
        if d.hub is not None:
            return {f"{d.hub}:{d.split}": {"source": "hub", "revision": d.revision}}
        path = self._source_path()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
        return {f"{self.name}:file": {"source": "local", "file": str(path), "sha256": digest}}

    def template(self) -> str:
        """The file's `prompt`."""
        return self.spec.prompt

    def prompt_fields(self, row: dict[str, Any]) -> dict[str, Any]:
        """Every column of the row."""
        return dict(row)

    # --- how it is judged ------------------------------------------------------------------------------------
    def _rule(self, what: str) -> str:
        return f"{self.name}.{what}"

    def grade(self, item: DatasetItem, answer: str, judges: Judges) -> Verdict:
        """Read with the declared extractor, score with the declared scorer."""
        gold = item.row[self.spec.answer]
        kind = self.spec.extract.kind
        if kind == "math":
            from evalkit_evals import math500

            v = math500.grade({"answer": str(gold)}, answer, judges.math)
            return replace(
                v,
                rule=(v.rule or "").replace("math500.", f"{self.name}.math."),
                why=v.why.replace("math500.", f"{self.name}.math."),
            )
        if kind == "choice":
            return self._grade_choice(item.row, gold, answer)
        if kind == "number":
            from evalkit_evals.gsm8k import read_final

            read = read_final(answer, "")
            if read.hedged:
                return Verdict(
                    "wrong",
                    read.raw,
                    f"{read.how}: {read.raw!r} names more than one candidate",
                    rule=self._rule("number.hedge"),
                )
            if read.value is None:
                return Verdict("unparsed", read.raw, read.how, rule=self._rule("number"))
            if read.readings:  # two readings disagree (a correction after the answer): both stay on the line
                return replace(self._score(item, _fmt(read.value), gold, judges), readings=read.readings)
            extracted = _fmt(read.value)
        elif kind == "code":
            code = _last_fenced(answer)
            if code is None:
                return Verdict("unparsed", None, "no code in the answer", rule=self._rule("code"))
            extracted = code
        else:
            pattern = self.spec.extract.pattern or ""
            try:
                hits = list(regex.finditer(pattern, answer, regex.MULTILINE, timeout=REGEX_TIMEOUT_S))
            except TimeoutError:
                return Verdict(
                    "error",
                    None,
                    f"the pattern {pattern!r} ran past its time limit ({REGEX_TIMEOUT_S:g} s) on this answer",
                    rule=self._rule("regex"),
                )
            if not hits:
                return Verdict("unparsed", None, f"no match of {self.spec.extract.pattern!r}", rule=self._rule("regex"))
            m = hits[-1]
            extracted = (m.group(1) if m.re.groups else m.group(0)).strip()
        return self._score(item, extracted, gold, judges)

    def _grade_choice(self, row: dict[str, Any], gold: Any, answer: str) -> Verdict:
        from evalkit_evals import musr

        assert self.spec.extract.choices is not None
        choices = _choices(row[self.spec.extract.choices])
        right = (
            int(gold) + 1
            if isinstance(gold, int)
            else next((i + 1 for i, c in enumerate(choices) if c.strip() == str(gold).strip()), None)
        )
        if right is None:
            raise ValueError(f"the gold {gold!r} is none of the choices")
        read = musr.extract(answer, choices)
        rule = read.rule.replace("musr.", f"{self.name}.choice.")
        if read.hedged:
            return Verdict("wrong", " | ".join(map(str, read.hedged)), f"{read.how}: names several choices", rule=rule)
        if read.choice is None:
            return Verdict("unparsed", read.raw, read.how, rule=rule)
        ok = choices[read.choice - 1].strip() == choices[right - 1].strip()
        return Verdict(
            "correct" if ok and read.rule != "musr.number_text_conflict" else "wrong",
            str(read.choice),
            f"{read.how}: {read.choice} ({choices[read.choice - 1].strip()!r}), gold {right}",
            rule=rule,
            readings=read.readings,
        )

    def _score(self, item: DatasetItem, extracted: str, gold: Any, judges: Judges) -> Verdict:
        kind, rule = self.score_kind, self._rule(f"{self.spec.extract.kind}.{self.score_kind}")
        if kind == "numeric":
            got, want = _decimal(extracted), _decimal(str(gold))
            if want is None:
                raise ValueError(f"the gold {gold!r} is not a number")
            if got is None:
                return Verdict("unparsed", extracted, f"{extracted!r} is not a number", rule=rule)
            ok = abs(got - want) <= Decimal(str(self.spec.score.tolerance))
            return Verdict("correct" if ok else "wrong", _fmt(got), f"read {_fmt(got)}, gold {_fmt(want)}", rule=rule)
        if kind == "math":
            res = judges.math.check(f"${gold}$", f"${extracted}$")
            if "error" in res:
                return Verdict("error", extracted, res["error"], rule=rule)
            return Verdict(
                "correct" if res["ok"] else "wrong",
                extracted,
                f"parsed {res['pred']}, gold {gold} parsed {res['gold']}",
                rule=rule,
            )
        if kind == "tests":
            return self._run_tests(item, extracted, judges, rule)
        a, b = extracted.strip(), str(gold).strip()
        same = a.casefold() == b.casefold() if self.spec.score.ignore_case else a == b
        return Verdict("correct" if same else "wrong", a, f"read {a!r}, gold {b!r}", rule=rule)

    def _run_tests(self, item: DatasetItem, code: str, judges: Judges, rule: str) -> Verdict:
        from evalkit_evals.sandbox import Worker

        if judges.code is None:
            raise RuntimeError("no code sandbox was set up for this run")
        entry = self.spec.score.entry_point or item.row.get("entry_point")
        tests = item.row.get("tests")
        if isinstance(tests, str):
            tests = json.loads(tests)
        if not entry or not isinstance(tests, list):
            raise ValueError("a tests score needs an entry point and a 'tests' column of [input, expected] pairs")
        passed, limits = 0, judges.code.limits
        # One wall limit for the whole answer (every call together), besides each call's own.
        deadline = time.monotonic() + limits.wall_s
        with Worker(code, str(entry), judges.code.isolation, limits) as w:
            why = w.start()
            if why is not None:
                return Verdict("wrong", code, f"the program did not load: {why}", rule=rule)
            for inp, expected in tests:
                left = deadline - time.monotonic()
                r = w.call(tuple(inp), min(_CALL_S, left)) if left > 0 else None
                if r is None or (r.status == "timeout" and time.monotonic() >= deadline):
                    return Verdict(
                        "wrong",
                        code,
                        f"{passed}/{len(tests)} tests passed when the answer's wall limit "
                        f"({limits.wall_s:g} s) ran out",
                        rule=rule,
                    )
                if r.status != "ok" or r.value != expected:
                    return Verdict(
                        "wrong",
                        code,
                        f"{passed}/{len(tests)} tests passed; {entry}{tuple(inp)!r}: "
                        f"{r.status} {r.error or r.value!r}, expected {expected!r}",
                        rule=rule,
                    )
                passed += 1
        return Verdict("correct", code, f"{passed}/{len(tests)} tests passed", rule=rule)

    def score_extra(self, lines: list[GradedLine]) -> ScoreExtra:
        """Nothing beyond the common scores."""
        return {}

    # --- how the sim answers ---------------------------------------------------------------------------------
    def sim_anchor(self, row: dict[str, Any]) -> tuple[str, str | None]:
        """The rendered prompt itself."""
        return self._render("prompt", self.spec.prompt, row).strip(), None

    def sim_answer(self, row: dict[str, Any], correct: bool, style: int) -> str:
        """The gold (or a wrong value) in the extractor's form, or through the file's `[sim] answer` template."""
        gold, kind = row[self.spec.answer], self.spec.extract.kind
        if kind == "choice":
            assert self.spec.extract.choices is not None
            choices = _choices(row[self.spec.extract.choices])
            k = int(gold) if isinstance(gold, int) else [c.strip() for c in choices].index(str(gold).strip())
            k = k if correct else (k + 1) % len(choices)
            value = f"{k + 1}"
            default = f"The most consistent option is {choices[k]}.\n\nANSWER: {value}"
        elif kind == "code":
            value = str(gold) if correct else "raise NotImplementedError('evalkit sim: intended wrong answer')"
            default = f"```python\n{value}\n```"
        else:
            numeric = kind in ("number", "math") or self.score_kind == "numeric"
            value = str(gold) if correct else (plus_one(str(gold)) if numeric else WRONG_TEXT)
            if kind == "math" and not correct and value.strip() == str(gold).strip():
                value = WRONG_MATH
            default = {
                "number": f"Working through it step by step.\nThe answer is {value}.",
                "math": f"Simplifying step by step, the final answer is $\\boxed{{{value}}}$.",
            }.get(kind, value)
        if self.spec.sim.answer is not None:
            return self._render("[sim] answer", self.spec.sim.answer, {**row, "answer": value}).strip()
        return default


def load_user_eval(path: Path) -> UserEval:
    """A user eval file, validated (one line on any problem)."""
    raw = read_toml(path)
    spec = validate(UserEvalFile, raw, path)
    assert isinstance(spec, UserEvalFile)
    for what, source in (("prompt", spec.prompt), ("[sim] answer", spec.sim.answer)):
        if source is None:
            continue
        try:
            template_environment().parse(source)
        except jinja2.TemplateSyntaxError as e:
            raise UsageError(f"{path}: {what}: Jinja syntax error on line {e.lineno}: {e.message}") from None
    runs_code = (spec.score.kind or DEFAULT_SCORE[spec.extract.kind]) == "tests"
    return UserEval(spec, path.resolve(), hashlib.sha256(path.read_bytes()).hexdigest(), runs_code)
