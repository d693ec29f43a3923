"""The light install (issue 30): evalkit with `--no-deps` plus only requirements/light.txt, in a fresh venv, runs
bench, stress and capability (`--data-dir`, no HumanEval+) against the sim, and renders their report.

One venv for the module (about a minute to install, from pip's cache or index); every command runs from outside
the source tree, so the installed copy is what imports. Marked `light_install`: `-m "not light_install"` skips it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIGHT = ROOT / "requirements" / "light.txt"
# What the light set leaves out, each for a reason the README gives: none of it may be importable there.
LEFT_OUT = ("datasets", "evalplus", "pandas", "plotly", "openai", "gguf")

pytestmark = [pytest.mark.light_install, pytest.mark.timeout(170)]


def light_requirements() -> list[str]:
    """requirements/light.txt's requirement lines, comments stripped."""
    lines = (ln.split("#", 1)[0].strip() for ln in LIGHT.read_text().splitlines())
    return [ln for ln in lines if ln]


def _name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower().replace("_", "-")


def test_light_set_is_the_default_install_less_the_demos_extras() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    light = light_requirements()
    assert sorted(light) == sorted(d for d in deps if _name(d) not in ("datasets", "evalplus", "pandas", "plotly"))
    assert not {_name(r) for r in light} & set(LEFT_OUT)


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv (no system site-packages) holding the light set and evalkit, installed `--no-deps`."""
    where = tmp_path_factory.mktemp("light-venv")
    venv.create(where / "venv", with_pip=True, clear=True)
    py = where / "venv" / "bin" / "python"
    # --no-compile: no .pyc for every file of numpy, scipy, sympy and matplotlib up front (what the commands import
    # is compiled as they import it); the install is what takes this fixture's time.
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
    # The light set first, then evalkit without its dependencies (so pip never resolves the default install).
    subprocess.run([*pip, *light_requirements()], check=True, timeout=150, cwd=where)
    subprocess.run([*pip, "--no-deps", str(ROOT)], check=True, timeout=60, cwd=where)
    yield py


def _evalkit(py: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([str(py), "-m", "evalkit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"evalkit {args[0]}: {p.stderr[-2000:]}"
    return p


def test_light_venv_has_none_of_the_left_out_packages(light_venv: Path, tmp_path: Path) -> None:
    code = (
        "import importlib.util, evalkit; "
        f"print([m for m in {LEFT_OUT!r} if importlib.util.find_spec(m)]); print(evalkit.__file__)"
    )
    out = subprocess.run(
        [str(light_venv), "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == "[]"
    assert str(ROOT) not in out[1]  # the installed copy, not the source tree
    assert (Path(out[1]).parent / "py.typed").exists()


def test_light_install_runs_bench_stress_capability_and_report(
    light_venv: Path, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.sim.launch import start_sim

    monkeypatch.chdir(tmp_path)  # the sim's `python -m` too imports the installed copy, not the source tree
    monkeypatch.delenv("PYTHONPATH", raising=False)
    out = tmp_path / "runs"
    with start_sim(["--time-scale", "50"], data_dir=data_dir, python=str(light_venv)) as sim:
        url = ["--base-url", sim.base_url, "--out", str(out)]
        _evalkit(light_venv, tmp_path, "bench", *url, "--name", "bench", "--max-tokens", "32", "--concurrency", "2")
        _evalkit(
            light_venv,
            tmp_path,
            "capability",
            *url,
            "--name",
            "capability",
            "--thinking",
            "off",
            "--datasets",
            "gsm8k,math500,musr",
            "--limit",
            "2",
            "--concurrency",
            "2",
            "--data-dir",
            str(data_dir),
        )
        _evalkit(
            light_venv,
            tmp_path,
            "stress",
            *url,
            "--name",
            "stress",
            "--cycles",
            "1",
            "--seed",
            "42",
            "--time-scale",
            "50",
            "--no-progress",
        )
    for run in ("bench", "capability", "stress"):
        assert (out / run / "summary.json").is_file(), run
    rep = _evalkit(
        light_venv,
        tmp_path,
        "report",
        *(str(out / r) for r in ("bench", "capability", "stress")),
        "-o",
        str(tmp_path / "report.md"),
    )
    assert "gsm8k" in (tmp_path / "report.md").read_text().lower()
    # No plotly in the light set: the page is skipped with one line, the markdown written.
    assert not (tmp_path / "report.html").exists()
    assert "report.html skipped: plotly is not installed" in rep.stderr
