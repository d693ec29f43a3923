"""HumanEval+: the evalplus-style prompt (`prompts/humanevalplus.j2`), code sanitized out of the chat answer
(never out of the reasoning), and evalplus's base and plus tests run in the sandbox (`code_judge.py`); right
only when both pass.

Task data comes from evalplus's own data API (`get_human_eval_plus`), pointed at the local native file
`evalplus__humanevalplus/HumanEvalPlus-v0.1.10.jsonl.gz` when a data directory is given.

Extraction: the fenced block that defines the entry point (the last such; other blocks that define names go before
it, for a solution split over several blocks), else the longest fenced block, else the whole answer; then
`evalplus.sanitize.sanitize`. An answer holding only a function body is completed onto the prompt
(evalplus's completion style). Import lines of the prompt (`from typing import List`) are prepended when the answer
omits them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from evalkit.errors import UsageError
from evalkit_evals.datasets import DatasetItem, HubSource, data_dir_from_env
from evalkit_evals.protocol import HubEval, Judges
from evalkit_evals.verdict import Verdict

if TYPE_CHECKING:
    from evalkit.runs.schemas import GradedLine
    from evalkit_evals.code_judge import CodeJudge
    from evalkit_evals.differential import Problem
    from evalkit_evals.protocol import ScoreExtra

NATIVE_FILE = "evalplus__humanevalplus/HumanEvalPlus-v0.1.10.jsonl.gz"
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


class HumanEvalRow(TypedDict):
    """A HumanEval+ row on the Hub: the task id, the prompt (signature and docstring), the reference solution, the
    entry point, and the tests."""

    task_id: str
    prompt: str
    canonical_solution: str
    entry_point: str
    test: str


def load_problems(data_dir: str | Path | None) -> dict[str, Problem]:
    """evalplus's HumanEval+ tasks by task id, from the local native file when a data directory is given."""
    import evalplus.data.humaneval as he

    root = data_dir_from_env(data_dir)
    if root is not None:
        path = root / NATIVE_FILE
        if not path.exists():
            raise UsageError(f"HumanEval+ native file not found: {path}")
        # evalplus reads HUMANEVAL_OVERRIDE_PATH at import; setting the module's copy works after import too.
        he.HUMANEVAL_OVERRIDE_PATH = str(path.resolve())
    try:
        problems: dict[str, Problem] = he.get_human_eval_plus()  # evalplus has no type information
        return problems
    except Exception as e:  # noqa: BLE001 - a failed download is one line
        raise UsageError(
            f"could not load HumanEval+ through evalplus: {type(e).__name__}; pass --data-dir or set EVALKIT_DATA_DIR"
        ) from None


_DEFINES_NAMES = re.compile(r"^(?:def|class|import|from)\s+\w", re.MULTILINE)
# A block that tests a solution rather than being part of it: a pytest or unittest module, test functions, or an
# import of the solution from a module. Its imports are never merged into the solution.
_TEST_MODULE = (
    r"^\s*(?:import\s+(?:pytest|unittest)\b|from\s+(?:pytest|unittest)\b|def\s+test_\w*\s*\(|"
    r"def\s+check\s*\(\s*candidate|class\s+Test\w*|@pytest\.|from\s+[\w.]+\s+import\s+[^\n]*\b(?:ENTRY)\b)"
)


def is_test_block(block: str, entry_point: str) -> bool:
    """Whether a fenced block tests the solution (pytest/unittest, `test_` functions, the solution imported)."""
    return bool(re.search(_TEST_MODULE.replace("(?:ENTRY)", re.escape(entry_point)), block, re.MULTILINE))


def _prompt_imports(prompt: str) -> list[str]:
    return [ln for ln in prompt.splitlines() if re.match(r"^(import|from)\s+\w", ln)]


def _is_body(prompt: str, text: str) -> bool:
    # A completion-style answer: indented lines that, appended to the prompt, make a valid program.
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if not first[:1].isspace():
        return False
    try:
        compile(prompt + text, "<answer>", "exec")
    except SyntaxError:
        return False
    return True


def extract_code(answer: str, prompt: str, entry_point: str) -> tuple[str | None, str]:
    """(program text, how it was found) from a chat answer; None when no code can be read."""
    from evalplus.sanitize import sanitize

    defines = re.compile(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", re.MULTILINE)
    blocks = [m.group(2) for m in _FENCE.finditer(answer) if m.group(1).lower() in ("", "python", "py", "python3")]
    if blocks:
        with_def = [b for b in blocks if defines.search(b)]
        text, how = (
            (with_def[-1], "fenced block defining the entry point")
            if with_def
            else (max(blocks, key=len), "longest fenced block")
        )
        helpers = [
            b
            for b in blocks
            if with_def and not defines.search(b) and _DEFINES_NAMES.search(b) and not is_test_block(b, entry_point)
        ]
        if helpers:
            # One solution over several blocks (helpers in one, the function in another): the blocks that define
            # other names go before it; the sanitizer keeps only what the entry point uses.
            text, how = "\n\n".join([*helpers, text]), how + " with the helpers of the other blocks"
    else:
        text, how = answer, "bare code"
    if not text.strip():
        return None, "no code in the answer"
    if defines.search(text):
        code = sanitize(text, entry_point)
    elif _is_body(prompt, text):
        code = sanitize(prompt + text, entry_point)
        how += ", body completed onto the prompt"
    else:
        return None, f"{how}: no definition of {entry_point}() and no function body"
    if not defines.search(code) and defines.search(text):
        # evalplus's sanitizer drops functions without a `return` (e.g. a body that only raises); such an
        # answer is readable code that fails its tests, not an unreadable one.
        code, how = text, f"{how}, as written (the sanitizer dropped a function without return)"
    if not code.strip() or not defines.search(code):
        return None, f"{how}: no definition of {entry_point}() after sanitizing"
    missing = [ln for ln in _prompt_imports(prompt) if ln not in code]
    if missing:
        code = "\n".join(missing) + "\n" + code
    return code, how


def grade(problem: Problem, answer: str, judge: CodeJudge) -> Verdict:
    """Run the sanitized answer against the base and plus inputs; correct only when both pass."""
    code, how = extract_code(answer, problem["prompt"], problem["entry_point"])
    if code is None:
        return Verdict("unparsed", None, how)
    res = judge.run(code, problem)
    base, plus = res["base"], res["plus"]
    ok = base["status"] == "pass" and plus["status"] == "pass"
    why = (
        f"{how}; base {base['status']} {base['passed']}/{base['total']}, "
        f"plus {plus['status']} {plus['passed']}/{plus['total']}"
    )
    for name, part in (("base", base), ("plus", plus)):
        if part.get("error"):
            why += f"; {name}: {part['error']}"
    return Verdict(
        "correct" if ok else "wrong",
        code,
        why,
        {"base": base["status"], "plus": plus["status"], "isolation": judge.isolation.tool},
    )


_RULES = (
    ("no code", "humanevalplus.no_code"),
    ("fenced block defining", "humanevalplus.fenced_entry_point"),
    ("longest fenced block", "humanevalplus.longest_fence"),
    ("bare code", "humanevalplus.bare_code"),
)


def rule_name(how: str) -> str:
    """The stable rule name of an extraction described by `how` (the start of a verdict's `why`)."""
    if "body completed onto the prompt" in how:
        return "humanevalplus.body_completed"
    if "no definition of" in how:
        return "humanevalplus.no_entry_point"
    return next((rule for start, rule in _RULES if how.startswith(start)), "humanevalplus.code")


@dataclass(frozen=True)
class HumanEvalPlus(HubEval[HumanEvalRow]):
    """HumanEval+'s 164 tasks; ids `humanevalplus:<task_id>`; grading runs code in the run's sandbox."""

    runs_code: bool = True

    def qid(self, split: str, index: int, row: HumanEvalRow) -> str:
        """`humanevalplus:<task_id>`."""
        return f"humanevalplus:{row['task_id']}"

    def prompt_fields(self, row: HumanEvalRow) -> dict[str, str]:
        """The function's signature and docstring, stripped."""
        return {"prompt": row["prompt"].strip()}

    def grade(self, item: DatasetItem, answer: str, judges: Judges) -> Verdict:
        """The sanitized code against evalplus's base and plus tests (evalplus's task data loaded once per run)."""
        if judges.code is None:
            raise RuntimeError("no code sandbox was set up for this run")
        problems = judges.cached("humanevalplus.problems", lambda: load_problems(judges.data_dir))
        verdict = grade(problems[self.row(item)["task_id"]], answer, judges.code)
        return replace(verdict, rule=verdict.rule or rule_name(verdict.why))

    def score_extra(self, lines: list[GradedLine]) -> ScoreExtra:
        """How many answers passed the base tests, and the plus tests."""
        return {
            "base_pass": sum(1 for ln in lines if (ln.details or {}).get("base") == "pass"),
            "plus_pass": sum(1 for ln in lines if (ln.details or {}).get("plus") == "pass"),
        }

    def sim_anchor(self, row: HumanEvalRow) -> tuple[str, str | None]:
        """The function's prompt."""
        return row["prompt"].strip(), None

    def sim_answer(self, row: HumanEvalRow, correct: bool, style: int) -> str:
        """The whole function fenced, bare, or between prose (wrong: a body that raises)."""
        body = (
            row["canonical_solution"]
            if correct
            else "    raise NotImplementedError('evalkit sim: intended wrong answer')\n"
        )
        code: str = (row["prompt"] + body).strip("\n")
        entry = row.get("entry_point", "the function")
        forms = [
            f"```python\n{code}\n```",
            code,
            f"Here is an implementation of `{entry}`.\n\n```python\n{code}\n```\n\n"
            "It follows the docstring's examples.",
        ]
        return forms[style % 3]


EVAL = HumanEvalPlus(
    "humanevalplus", (HubSource("evalplus/humanevalplus", None, "test", None, "evalplus__humanevalplus/test.jsonl.gz"),)
)
