"""User evals without code (`evalkit capability --eval FILE`, `evalkit sim --eval FILE`) and `evalkit export`.

The example `examples/evals/capitals.toml` runs against two sims of different seeds; the report lists exactly the
questions whose grade flipped. Each extractor and scorer has its table row; the loaders read JSONL, CSV and Parquet
alike; a bad file is one line and exit 2; the export holds every request with its grade."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.errors import UsageError
from evalkit.sim.launch import start_sim
from evalkit_evals.math_judge import MathJudge
from evalkit_evals.protocol import Judges
from evalkit_evals.user_eval import load_user_eval

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "evals" / "capitals.toml"
EVALKIT = [sys.executable, "-m", "evalkit"]


def _capability(base_url: str, out: Path, name: str) -> Path:
    proc = subprocess.run(
        [
            *EVALKIT,
            "capability",
            "--base-url",
            base_url,
            "--out",
            str(out),
            "--name",
            name,
            "--thinking",
            "off",
            "--eval",
            str(EXAMPLE),
            "--concurrency",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return Path(proc.stdout.strip().splitlines()[-1])


def _graded(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "graded.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The example against two sims (accuracy 0.6, seeds 1 and 2)."""
    out = tmp_path_factory.mktemp("usereval")
    got = {}
    for seed in ("1", "2"):
        with start_sim(["--time-scale", "200", "--accuracy", "0.6", "--seed", seed, "--eval", str(EXAMPLE)]) as s:
            got[seed] = _capability(s.base_url, out, f"seed{seed}")
    yield got


def test_the_example_runs_like_a_builtin_and_the_report_lists_the_flips(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _graded(runs["1"]), _graded(runs["2"])
    assert len(a) == len(b) == 24 and {g["dataset"] for g in a + b} == {"capitals"}
    assert {g["rule"] for g in a} == {"capitals.regex.exact"}
    first = next(g for g in a if g["id"] == "capitals:fr")
    assert first["prompt"] == (
        'What is the capital city of France?\nReply briefly, and end with a line of the form "Answer: CITY".\n'
    )
    manifest = json.loads((runs["1"] / "manifest.json").read_text())
    assert manifest["datasets"] == ["capitals"] and manifest["user_evals"]["capitals"]["file"] == str(EXAMPLE)
    summary = json.loads((runs["1"] / "summary.json").read_text())
    assert summary["scores"]["capitals"]["correct"] == sum(g["correct"] for g in a)
    flips = {
        g["id"]: ("right→wrong" if g["correct"] else "wrong→right")
        for g in a
        for h in b
        if g["id"] == h["id"] and g["correct"] != h["correct"]
    }
    assert flips, "two seeds at accuracy 0.6 flip some of 24 questions"
    report = tmp_path / "report.md"
    assert main(["report", str(runs["1"]), str(runs["2"]), "--labels", "s1,s2", "-o", str(report)]) == 0
    assert "unknown dataset" not in capsys.readouterr().err
    md = report.read_text()
    assert "| capitals | " in md  # the score table has the dataset's row, with its noise mark
    listed, inside = {}, False
    for line in md.splitlines():
        if line.startswith("### "):
            inside = line.startswith("### Changed questions, capitals")
        elif inside and line.startswith("| capitals:"):
            cells = [c.strip() for c in line.strip("| ").split(" | ")]
            listed[cells[0]] = cells[1]
    assert listed == flips


def _eval(tmp_path: Path, body: str, rows: list[dict], name: str = "t.toml") -> object:
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return load_user_eval(path)


NUMBER = 'name = "n"\nprompt = "{{ q }}"\nanswer = "gold"\n[dataset]\npath = "rows.jsonl"\n[extract]\nkind = "number"\n'
CHOICE = (
    'name = "c"\nprompt = "{{ q }}"\nanswer = "gold"\n[dataset]\npath = "rows.jsonl"\n[extract]\n'
    'kind = "choice"\nchoices = "opts"\n'
)
MATH = 'name = "m"\nprompt = "{{ q }}"\nanswer = "gold"\n[dataset]\npath = "rows.jsonl"\n[extract]\nkind = "math"\n'
CODE = 'name = "k"\nprompt = "{{ q }}"\nanswer = "gold"\n[dataset]\npath = "rows.jsonl"\n[extract]\nkind = "code"\n'
REGEX = (
    'name = "r"\nprompt = "{{ q }}"\nanswer = "gold"\n[dataset]\npath = "rows.jsonl"\n[extract]\nkind = "regex"\n'
    "pattern = 'Answer: (.+)'\n[sim]\nanswer = 'Answer: {{ answer }}'\n"
)

# (file, gold, extra columns, answer, outcome): one row a case.
CASES = [
    (NUMBER, "1234", {}, "So the total is **1,234** marbles.", "correct"),
    (NUMBER, "1234", {}, "#### 1235", "wrong"),
    (NUMBER, "18", {}, "The answer is 15 or 18.", "wrong"),
    (NUMBER, "5", {}, "I cannot tell.", "unparsed"),
    (CHOICE, "Ana", {"opts": ["Ben", "Ana"]}, "The thief was Ana.\n\nANSWER: 2", "correct"),
    (CHOICE, 0, {"opts": ["Ben", "Ana"]}, "ANSWER: 2", "wrong"),
    (CHOICE, "Ben", {"opts": "['Ben', 'Ana']"}, "ANSWER: Ben", "correct"),
    (MATH, "\\frac{1}{2}", {}, "The final answer is $\\boxed{0.5}$.", "correct"),
    (MATH, "\\frac{1}{2}", {}, "The final answer is $\\boxed{3}$.", "wrong"),
    (CODE, "print(1)", {}, "Here:\n```python\nprint(1)\n```", "correct"),
    (CODE, "print(1)", {}, "```python\nprint(2)\n```", "wrong"),
    (REGEX, "Paris", {}, "Answer: Paris", "correct"),
    (REGEX, "Paris", {}, "Answer: paris", "wrong"),
    (REGEX + "[score]\nignore_case = true\n", "Paris", {}, "Answer: paris", "correct"),
    (REGEX + '[score]\nkind = "numeric"\ntolerance = 0.01\n', "3.14", {}, "Answer: 3.141", "correct"),
    (REGEX, "Paris", {}, "Paris, surely.", "unparsed"),
]


@pytest.fixture(scope="module")
def judges() -> Iterator[Judges]:
    j = Judges(None, MathJudge())
    yield j
    j.math.close()


@pytest.mark.parametrize("body,gold,extra,answer,outcome", CASES)
def test_extractors_and_scorers(
    tmp_path: Path, judges: Judges, body: str, gold: object, extra: dict, answer: str, outcome: str
) -> None:
    ev = _eval(tmp_path, body, [{"q": "question?", "gold": gold, **extra}])
    [item] = ev.load(None)
    verdict = ev.grade(item, answer, judges)
    assert verdict.outcome == outcome, verdict
    assert verdict.rule.startswith(f"{ev.name}.")
    # The sim's own answers grade as it means them.
    for correct in (True, False):
        assert ev.grade(item, ev.sim_answer(item.row, correct, 0), judges).correct == correct


def test_jsonl_csv_and_parquet_read_alike(tmp_path: Path) -> None:
    import pandas as pd

    rows = [{"id": "a", "q": "one", "gold": "1"}, {"id": "b", "q": "two", "gold": "2"}]
    body = NUMBER.replace('path = "rows.jsonl"', 'path = "rows.{ext}"\nid_column = "id"')
    pd.DataFrame(rows).to_csv(tmp_path / "rows.csv", index=False)
    pd.DataFrame(rows).to_parquet(tmp_path / "rows.parquet", index=False)
    got = {}
    for ext in ("jsonl", "csv", "parquet"):
        ev = _eval(tmp_path, body.replace("{ext}", ext), rows, f"{ext}.toml")
        got[ext] = [(it.qid, it.row) for it in ev.load(None)]
    assert got["jsonl"] == got["csv"] == got["parquet"] == [("n:a", rows[0]), ("n:b", rows[1])]


def test_parquet_without_pyarrow_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    pd.DataFrame([{"q": "x", "gold": "1"}]).to_parquet(tmp_path / "rows.parquet", index=False)
    ev = _eval(tmp_path, NUMBER.replace("rows.jsonl", "rows.parquet"), [])
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(UsageError, match="needs pyarrow"):
        ev.load(None)


BAD = [
    ("unknown key", NUMBER + "colour = 'red'\n", "unknown key 'extract.colour'"),
    ("no source", NUMBER.replace('path = "rows.jsonl"\n', ""), "exactly one of 'path'"),
    ("hub unpinned", NUMBER.replace('path = "rows.jsonl"', 'hub = "org/x"\nrevision = "main"'), "40-hex commit"),
    ("bad extractor", NUMBER.replace('kind = "number"', 'kind = "vibes"'), "extract.kind"),
    ("bad regex", REGEX.replace("Answer: (.+)", "Answer: (.+"), "not a regular expression"),
    ("mismatched score", NUMBER + '[score]\nkind = "math"\n', "scores with numeric or exact"),
    ("bad name", NUMBER.replace('name = "n"', 'name = "My Eval"'), "key 'name'"),
    ("builtin name", NUMBER.replace('name = "n"', 'name = "gsm8k"'), "built-in dataset"),
    ("jinja syntax", NUMBER.replace('"{{ q }}"', '"{{ q "'), "Jinja syntax error"),
    ("undefined column", NUMBER.replace('"{{ q }}"', '"{{ question }}"'), "'question' is undefined"),
    ("missing file", NUMBER.replace("rows.jsonl", "nosuch.jsonl"), "dataset file not found"),
    ("malformed toml", "name = \n", "malformed TOML"),
]


@pytest.mark.parametrize("what,body,needle", BAD, ids=[b[0] for b in BAD])
def test_a_bad_eval_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str, body: str, needle: str
) -> None:
    (tmp_path / "rows.jsonl").write_text('{"q": "x", "gold": "1"}\n', encoding="utf-8")
    (tmp_path / "bad.toml").write_text(body, encoding="utf-8")
    code = main(
        [
            "capability",
            "--eval",
            str(tmp_path / "bad.toml"),
            "--thinking",
            "off",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--out",
            str(tmp_path),
            "--name",
            "x",
        ]
    )
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and needle in err[0] and "Traceback" not in err[0], err


def test_export_joins_requests_and_grades(runs: dict[str, Path], tmp_path: Path) -> None:
    import pandas as pd

    graded = {g["request_id"]: g for g in _graded(runs["1"])}
    for fmt in ("csv", "parquet"):
        out = tmp_path / f"t.{fmt}"
        assert main(["export", str(runs["1"]), "--format", fmt, "-o", str(out)]) == 0
        df = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
        assert len(df) == 24 and list(df.columns[:4]) == ["run", "kind", "request_id", "id"]
        for row in df.to_dict(orient="records"):
            g = graded[row["request_id"]]
            assert (row["id"], bool(row["correct"]), row["outcome"]) == (g["id"], g["correct"], g["outcome"])
            assert row["status"] == "ok" and row["ttft_s"] > 0


def test_export_parquet_without_pyarrow_and_of_no_run(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert main(["export", str(runs["1"]), "--format", "parquet", "-o", str(tmp_path / "x.parquet")]) == 2
    assert main(["export", str(tmp_path / "nosuch")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 2 and "needs pyarrow" in err[0] and "not a finished run directory" in err[1], err
    assert not (tmp_path / "x.parquet").exists()
