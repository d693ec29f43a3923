"""The light install (issues 30 and 58): the light set is evalkit's own dependencies, so an offline box installs it
from a folder of wheels, `pip install --no-index --find-links WHEELS evalkit`, with no Hub or HumanEval+ packages
among them; in that fresh venv evalkit runs bench, stress and capability (`--data-dir`, no HumanEval+) against the
sim and renders their report (report.md and report.html), and the README's demo runs, skipping HumanEval+ in one
line.

One venv for the module (about a minute: the wheels from pip's cache or index, then the install with no index);
every command runs from outside the source tree, so the installed copy is what imports. Marked `light_install`:
`-m "not light_install"` skips it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIGHT = ROOT / "requirements" / "light.txt"
# What the light set leaves out, each for a reason the README gives: none of it may be importable there.
LEFT_OUT = ("datasets", "evalplus", "pandas", "openai", "gguf")

pytestmark = [pytest.mark.light_install, pytest.mark.timeout(300)]


def light_requirements() -> list[str]:
    """requirements/light.txt's requirement lines, comments stripped."""
    lines = (ln.split("#", 1)[0].strip() for ln in LIGHT.read_text().splitlines())
    return [ln for ln in lines if ln]


def _name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower().replace("_", "-")


def _pyproject() -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"])


def test_light_set_is_the_package_dependencies() -> None:
    project = _pyproject()
    light = light_requirements()
    assert sorted(light) == sorted(project["dependencies"])
    assert not {_name(r) for r in light} & set(LEFT_OUT)
    extras = project["optional-dependencies"]
    assert {_name(r) for r in extras["hub"]} == {"datasets", "evalplus"}
    # `pip install -e '.[test]'` (the README's second command) pulls what the light set leaves out.
    for name in ("datasets", "evalplus", "pandas"):
        assert name in {_name(r) for r in extras["test"]} and name in {_name(r) for r in extras["full"]}


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv (no system site-packages) holding evalkit installed from a folder of wheels with no index: the
    wheels are evalkit's and the light set's (with what they need), nothing else."""
    where = tmp_path_factory.mktemp("light-venv")
    wheels = where / "wheels"
    # The wheel folder, built where the index (or pip's cache) is reachable: the light set's closure and evalkit.
    wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--wheel-dir", str(wheels)]
    subprocess.run([*wheel, *light_requirements()], check=True, timeout=240, cwd=where)
    subprocess.run([*wheel, "--no-deps", str(ROOT)], check=True, timeout=120, cwd=where)
    names = {_name(w.name.split("-")[0]) for w in wheels.glob("*.whl")}
    assert not names & set(LEFT_OUT), names & set(LEFT_OUT)
    venv.create(where / "venv", with_pip=True, clear=True)
    py = where / "venv" / "bin" / "python"
    # --no-compile: no .pyc for every file of numpy, scipy, sympy and matplotlib up front (what the commands import
    # is compiled as they import it). --no-index: evalkit's dependencies must all be among the wheels.
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
    subprocess.run([*pip, "--no-index", "--find-links", str(wheels), "evalkit"], check=True, timeout=240, cwd=where)
    yield py


def _evalkit(py: Path, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run(
        [str(py), "-m", "evalkit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
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


def test_types_hold_without_the_optional_extras(light_venv: Path, tmp_path: Path) -> None:
    """mypy strict over evalkit, its evals and its stress test against the light venv's packages: no Ray, Hub,
    HumanEval+, pandas, gguf or NVML, so whatever they would type is unknown there (the CI's lint checks it with
    them all installed)."""
    pytest.importorskip("mypy", reason="mypy comes with the lint extra")
    if not (ROOT / "build" / "typecheck" / "evalkit").exists():
        pytest.skip("tools/lint.sh makes build/typecheck, the import names mypy reads")
    code = (
        "import importlib.util; "
        "print([m for m in ('ray', 'datasets', 'evalplus', 'pandas', 'gguf', 'pynvml') if importlib.util.find_spec(m)])"
    )
    assert subprocess.run([str(light_venv), "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
    args = ["--python-executable", str(light_venv), "--cache-dir", str(tmp_path / "mypy-cache")]
    packages = ["-p", "evalkit", "-p", "evalkit_evals", "-p", "evalkit_stress"]
    p = subprocess.run(
        [sys.executable, "-m", "mypy", *args, *packages], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-1000:]


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
    # plotly is in the light set: the page is written beside the markdown.
    assert (tmp_path / "report.html").stat().st_size > 100_000
    assert "report.html skipped" not in rep.stderr


def test_light_install_runs_the_readme_demo(
    light_venv: Path, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's first command on a fresh machine (`pip install -e .`, the light set): the demo runs, its
    capability step without HumanEval+ (one line says why and how to add it), and ends with the answer."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    p = _evalkit(
        light_venv,
        tmp_path,
        "demo",
        "--out",
        str(tmp_path),
        "--name",
        "d",
        "--cycles",
        "1",
        "--limit",
        "1",
        "--data-dir",
        str(data_dir),
        timeout=280,
    )
    skipped = [ln for ln in p.stderr.splitlines() if "HumanEval+" in ln and "skipping" in ln]
    assert len(skipped) == 1 and "evalkit[hub]" in skipped[0], p.stderr[-2000:]
    assert (tmp_path / "d" / "report.html").is_file()
    assert "## The answer: after against before" in (tmp_path / "d" / "report.md").read_text()
    assert "The answer: after against before" in p.stdout.split("report: ", 1)[1]
    cap = (tmp_path / "d" / "after-capability" / "summary.json").read_text()
    assert "gsm8k" in cap and "humanevalplus" not in cap
