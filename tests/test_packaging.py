"""A non-editable install ships every module and the prompt and report templates inside the wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_wheel_holds_code_prompts_and_templates(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    [wheel] = tmp_path.glob("evalkit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, package in [
        ("evalkit", "evalkit"),
        ("evals", "evalkit_evals"),
        ("stress", "evalkit_stress"),
        ("prompts", "evalkit_prompts"),
        ("report_templates", "evalkit_report_templates"),
    ]:
        src = REPO / folder
        for f in src.rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc",):
                rel = f.relative_to(src).as_posix()
                assert f"{package}/{rel}" in names, f"{folder}/{rel} missing from the wheel"
    assert not any(n.startswith(("evals/", "stress/", "tests/")) for n in names), "bare top-level names leaked"
