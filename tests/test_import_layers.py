"""The layers point down (docs/architecture.md): import-linter's contract in pyproject.toml holds on the tree, breaks
on a planted upward import, and every module of evalkit sits in one of its layers."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
# Folder -> import name (pyproject's package-dir): the copy is laid out by import name, so the linter reads it alone.
FOLDERS = {"evalkit": "evalkit", "evals": "evalkit_evals", "stress": "evalkit_stress"}


def _copy(tmp_path: Path) -> Path:
    for folder, name in FOLDERS.items():
        shutil.copytree(ROOT / folder, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    # Run in the copy's root, which `python -c` puts first on the path: the linter reads the copy, not the installed
    # (editable) packages.
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_layers_hold_on_the_tree(tmp_path: Path) -> None:
    run = _lint(_copy(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 kept, 0 broken" in run.stdout


def test_a_planted_upward_import_breaks_them(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    stats = root / "evalkit" / "stats.py"
    stats.write_text(stats.read_text() + "\nimport evalkit.commands  # planted: the core reaching up to the CLI\n")
    run = _lint(root)
    assert run.returncode != 0
    assert "BROKEN" in run.stdout and "evalkit.stats -> evalkit.commands" in run.stdout


def test_a_planted_sideways_import_breaks_them(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    target = root / "evalkit" / "load" / "slo.py"
    target.write_text(target.read_text() + "\nimport evalkit_stress.prompts_file  # planted: load reaching sideways\n")
    (root / "evalkit_stress" / "prompts_file.py").write_text('"""A planted stress module."""\n')
    run = _lint(root)
    assert run.returncode != 0
    assert "evalkit.load.slo -> evalkit_stress.prompts_file" in run.stdout


def test_every_module_sits_in_a_layer() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = config["contracts"]
    named = {m.strip() for layer in contract["layers"] for part in layer.split("|") for m in part.split(":")}
    top = {
        f"evalkit.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "evalkit").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    assert top - named == set(), "a module of evalkit outside every layer: add it to pyproject's [tool.importlinter]"
    assert {"evalkit_evals", "evalkit_stress"} <= named


def test_auxiliary_calls_have_one_http_stack() -> None:
    """Only evalkit.client.auxiliary imports aiohttp's client (the sim serves with aiohttp.web: the server side)."""
    importers = set()
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else []
                )
                if any(n == "aiohttp" or n.startswith("aiohttp.") for n in names):
                    importers.add(path.relative_to(ROOT).as_posix())
    assert {p for p in importers if not p.startswith("evalkit/sim/")} == {"evalkit/client/auxiliary.py"}
