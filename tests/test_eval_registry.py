"""Adding a dataset is one new file plus one registry line: a toy eval module, registered by one line in a
launcher, is asked by `evalkit capability` against `evalkit sim` (both launched with that line), graded and
summarised like the built-ins. Also: the registry knows the built-ins in order without importing them."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from evalkit.sim.launch import start_sim
from evalkit_evals import registry

# The one new file: a whole eval (rows, prompt, grading, the sim's answers) behind evalkit_evals.protocol.Eval.
TOY_EVAL = '''"""Toy sums: add two numbers (a test fixture showing what one eval file holds)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit_evals.datasets import DatasetItem
from evalkit_evals.verdict import Verdict

ROWS = [{"a": 3 * i + 1, "b": 7 * i + 2} for i in range(12)]


@dataclass(frozen=True)
class ToySums:
    name: str = "toysums"
    runs_code: bool = False

    def load(self, data_dir: Any) -> list[DatasetItem]:
        return [DatasetItem(f"toysums:{i}", self.name, "test", i, r) for i, r in enumerate(ROWS)]

    def revision(self, data_dir: Any) -> dict[str, Any]:
        return {"toysums:inline": {"source": "inline", "revision": "v1"}}

    def template(self) -> str:
        return "Toy sum question: what is {{ a }} plus {{ b }}? Reply with the number only."

    def prompt_fields(self, row: dict[str, Any]) -> dict[str, Any]:
        return dict(row)

    def grade(self, item: DatasetItem, answer: str, judges: Any) -> Verdict:
        gold, got = item.row["a"] + item.row["b"], answer.strip()
        return Verdict("correct" if got == str(gold) else "wrong", got, f"read {got!r}, gold {gold}",
                       rule="toysums.exact")

    def score_extra(self, lines: list[dict[str, Any]]) -> dict[str, Any]:
        return {}

    def sim_anchor(self, row: dict[str, Any]) -> tuple[str, str | None]:
        return f"Toy sum question: what is {row['a']} plus {row['b']}?", None

    def sim_answer(self, row: dict[str, Any], correct: bool, style: int) -> str:
        return str(row["a"] + row["b"] + (0 if correct else 1))


EVAL = ToySums()
'''

# What evals/registry.py's BUILTIN tuple gains for a new built-in file: one line. Registered at run time here, so
# the test leaves the tree alone; the launcher runs `-m MODULE ARGS` after it (as `python` would).
LAUNCHER = """#!{python}
import runpy, sys
sys.path.insert(0, {folder!r})
from evalkit_evals import registry
import toy_sums; registry.register(toy_sums.EVAL)  # the one registry line
module = sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def test_builtins_are_listed_in_order_without_importing_them() -> None:
    code = (
        "import sys; from evalkit_evals import registry; "
        "print(registry.names(), [m for m in ('evalkit_evals.gsm8k', 'evalkit_evals.humanevalplus') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['gsm8k', 'math500', 'musr', 'humanevalplus'] []"
    assert registry.ordered(["trivia", "musr", "gsm8k"]) == ["gsm8k", "musr", "trivia"]
    assert all(isinstance(registry.get(n), registry.Eval) for n in registry.BUILTIN)
    # The core checks run files without importing evals: its list of built-ins must be the registry's.
    from evalkit.runs.summaries import KNOWN_DATASETS

    assert tuple(KNOWN_DATASETS) == registry.BUILTIN


def test_a_toy_dataset_is_one_file_and_one_registry_line(tmp_path: Path) -> None:
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "toy_sums.py").write_text(TOY_EVAL, encoding="utf-8")
    launcher = folder / "launch"
    launcher.write_text(LAUNCHER.format(python=sys.executable, folder=str(folder)), encoding="utf-8")
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR)
    with start_sim(["--time-scale", "200", "--accuracy", "0.5", "--seed", "7"], python=str(launcher)) as sim:
        proc = subprocess.run(
            [
                str(launcher),
                "-m",
                "evalkit",
                "capability",
                "--base-url",
                sim.base_url,
                "--datasets",
                "toysums",
                "--thinking",
                "off",
                "--out",
                str(tmp_path),
                "--name",
                "toy",
                "--concurrency",
                "4",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        intended = {e["request_id"]: e.get("intended_correct") for e in sim.events()}
    run = tmp_path / "toy"
    graded = [json.loads(ln) for ln in (run / "graded.jsonl").read_text().splitlines()]
    assert sorted(g["id"] for g in graded) == sorted(f"toysums:{i}" for i in range(12))
    assert {g["dataset"] for g in graded} == {"toysums"} and {g["rule"] for g in graded} == {"toysums.exact"}
    # Every grade is what the sim meant: its right answers graded right, its wrong ones wrong.
    assert [g["correct"] for g in graded] == [intended[g["request_id"]] for g in graded]
    assert 0 < sum(g["correct"] for g in graded) < 12
    assert graded[0]["prompt"].startswith("Toy sum question: what is ") and graded[0]["dataset_revision"] == "v1"
    summary = json.loads((run / "summary.json").read_text())
    assert list(summary["scores"]) == ["toysums"]
    assert summary["scores"]["toysums"]["total"] == 12
    assert summary["scores"]["toysums"]["correct"] == sum(g["correct"] for g in graded)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["datasets"] == ["toysums"] and manifest["code_isolation"]["tool"] is None


BLOCKED_RUN = """
import sys
class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("datasets", "evalplus", "math_verify"):
            raise ImportError(f"blocked: {name}")
sys.meta_path.insert(0, _Blocked())
from evalkit.cli import main
code = main(sys.argv[1:])
print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in ("datasets", "evalplus", "math_verify")))
sys.exit(code)
"""


def test_capability_from_a_data_dir_needs_no_heavy_library(sim, tmp_path: Path) -> None:
    """With `datasets`, `evalplus` and `math_verify` unimportable, GSM8K and MuSR run from the data directory."""
    server = sim("--time-scale", "200")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            BLOCKED_RUN,
            "capability",
            "--base-url",
            server.base_url,
            "--datasets",
            "gsm8k,musr",
            "--limit",
            "2",
            "--thinking",
            "off",
            "--out",
            str(tmp_path),
            "--name",
            "light",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "loaded: []" in proc.stdout
    graded = [json.loads(ln) for ln in (tmp_path / "light" / "graded.jsonl").read_text().splitlines()]
    assert len(graded) == 4 and all(g["correct"] for g in graded)
