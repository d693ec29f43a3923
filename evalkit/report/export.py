"""One run's requests and grades as one table (pandas), for notebooks: `evalkit export RUN --format csv|parquet`.

One row per request (`requests.jsonl`), joined by `request_id` with its grade (`graded.jsonl`): a capability run's
rows carry both, a replay's only grades, a bench or stress run's only requests. Nested values (server timings,
grading details, readings) are JSON text, so CSV and Parquet hold the same cells.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, cast

from evalkit.errors import UsageError
from evalkit.runs.rundir import iter_runs, read_jsonl
from evalkit.runs.schemas import GradedLine, RequestLine

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("csv", "parquet")
FIRST = ("run", "kind", "request_id", "id", "dataset", "repeat", "status", "outcome", "correct")


Cell = str | int | float | bool | None  # a JSON scalar; an object or a list is held as its JSON text


def _cell(v: object) -> Cell:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, ensure_ascii=False)
    return cast(Cell, v)  # the rest of a JSON line is scalars


def run_rows(run: Path) -> list[dict[str, Cell]]:
    """The run's rows: each request with its grade (graded fields win where both files hold one), then grades
    without a request (a replay)."""
    [(path, manifest, _)] = list(iter_runs([run]))
    base = {"run": path.name, "kind": manifest.get("kind")}
    requests = read_jsonl(path / "requests.jsonl", RequestLine)
    graded = read_jsonl(path / "graded.jsonl", GradedLine)
    by_request = {g["request_id"]: g for g in graded if g.get("request_id")}
    rows = [{**base, **r, **by_request.pop(r["request_id"], {})} for r in requests]
    rows += [{**base, **g} for g in graded if not g.get("request_id") or g["request_id"] in by_request]
    return [{k: _cell(v) for k, v in row.items()} for row in rows]


def run_table(run: Path) -> pd.DataFrame:
    """The run's rows as a DataFrame, identifying columns first."""
    import pandas as pd

    df = pd.DataFrame(run_rows(run))
    for col in df.columns:
        kinds = {type(v) for v in df[col] if v is not None}
        if len(kinds) > 1 and not kinds <= {int, float}:
            # Parquet wants one type per column: a column mixing, say, numbers and text holds text.
            df[col] = [None if v is None else str(v) for v in df[col]]
    first = [c for c in FIRST if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]]


def write_table(run: Path, fmt: str, out: Path) -> int:
    """Write the table as CSV or Parquet (which needs pyarrow); the number of rows."""
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401 - pandas writes Parquet through it
        except ImportError:
            raise UsageError(
                "--format parquet needs pyarrow, which is not installed (pip install pyarrow), or use --format csv"
            ) from None
    df = run_table(run)
    if fmt == "csv":
        df.to_csv(out, index=False)
    else:
        df.to_parquet(out, index=False, engine="pyarrow")
    return len(df)
