"""What one capability eval is, as every eval module (`evals/gsm8k.py`, ...) and a user eval file provide it.

The split follows inspect_ai's: *what is asked* (`load`, `template`, `prompt_fields`), *how it is judged* (`grade`,
`score_extra`), and how `evalkit sim` recognises and answers it (`sim_anchor`, `sim_answer`). The runner, the
client and the result files are elsewhere; an eval never reaches into them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypedDict, TypeVar, cast, runtime_checkable

from evalkit_evals.datasets import DatasetItem, HubSource, RowT, SourceRevision, load_sources, sources_revision

if TYPE_CHECKING:
    from evalkit.runs.schemas import GradedLine
    from evalkit_evals.code_judge import CodeJudge
    from evalkit_evals.math_judge import MathJudge
    from evalkit_evals.verdict import Verdict


@dataclass
class Judges:
    """What grading may use, set up once per run: the math-verify worker, the code sandbox (None when the run set
    none up), the data directory, and a per-run cache an eval may keep its own data in (`cached`)."""

    data_dir: str | Path | None
    math: MathJudge
    code: CodeJudge | None = None
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def cached(self, key: str, make: Callable[[], Any]) -> Any:
        """`make()` once per run under `key` (gradings run in two threads)."""
        with self._lock:
            if key not in self._cache:
                self._cache[key] = make()
            return self._cache[key]


class ScoreExtra(TypedDict, total=False):
    """Figures a dataset adds to its `summary.json` entry (`Eval.score_extra`): HumanEval+'s base and plus passes."""

    base_pass: int
    plus_pass: int


RowIn = TypeVar("RowIn", contravariant=True)  # the rows an eval reads, in its dataset's columns


@runtime_checkable
class Eval(Protocol[RowIn]):
    """One capability dataset behind one small protocol; `name` is the `dataset` field and the question-id prefix.
    `RowIn` is its rows' type (a TypedDict of its columns; a user eval's rows are the user's own JSON objects); a
    caller that holds any eval (`registry.get`) passes an item's row as it was read."""

    # Read-only: evals are frozen dataclasses, a user eval's name a property.
    @property
    def name(self) -> str:
        """The dataset's name."""
        ...

    @property
    def runs_code(self) -> bool:
        """Grading runs model-written code: the run sets up the sandbox."""
        ...

    def load(self, data_dir: str | Path | None) -> list[DatasetItem]:
        """Every item, in the dataset's row order, with its contract question id."""
        ...

    def revision(self, data_dir: str | Path | None) -> dict[str, SourceRevision]:
        """Where the rows came from (Hub revision or local file hash), recorded in the run's manifest."""
        ...

    def template(self) -> str:
        """The Jinja source of the user message."""
        ...

    def prompt_fields(self, row: RowIn) -> dict[str, Any]:
        """The template's variables for one row."""
        ...

    def grade(self, item: DatasetItem, answer: str, judges: Judges) -> Verdict:
        """Extract the final answer from the text after the reasoning and score it against the row's gold."""
        ...

    def score_extra(self, lines: list[GradedLine]) -> ScoreExtra:
        """Figures this dataset adds to its `summary.json` entry (e.g. HumanEval+'s base and plus passes)."""
        ...

    def sim_anchor(self, row: RowIn) -> tuple[str, str | None]:
        """The verbatim text a prompt of this row contains (and a second text it must also contain, or None)."""
        ...

    def sim_answer(self, row: RowIn, correct: bool, style: int) -> str:
        """An answer as a model might write it, right or wrong as asked, in one of several styles."""
        ...


@dataclass(frozen=True)
class HubEval(Generic[RowT]):
    """The common part of the built-in evals: rows from pinned Hub splits (or their local copies) in the columns
    `RowT` names, the template `prompts/<name>.j2`, ids `<name>:<row index>` unless `qid` says otherwise, nothing
    extra in the summary."""

    name: str
    sources: tuple[HubSource, ...]
    runs_code: bool = False

    def qid(self, split: str, index: int, row: RowT) -> str:
        """The contract question id of one row."""
        return f"{self.name}:{index}"

    def row(self, item: DatasetItem) -> RowT:
        """One of this eval's items' row, in its dataset's columns."""
        return cast(RowT, item.row)

    def load(self, data_dir: str | Path | None) -> list[DatasetItem]:
        """Every item, in the Hub's row order."""
        return load_sources(self.name, self.sources, self.qid, data_dir)

    def revision(self, data_dir: str | Path | None) -> dict[str, SourceRevision]:
        """Hub id and revision, or the local files' hashes."""
        return sources_revision(self.sources, data_dir)

    def template(self) -> str:
        """`prompts/<name>.j2`."""
        return (files("evalkit_prompts") / f"{self.name}.j2").read_text(encoding="utf-8")

    def score_extra(self, lines: list[GradedLine]) -> ScoreExtra:
        """Nothing beyond the common scores."""
        return {}
