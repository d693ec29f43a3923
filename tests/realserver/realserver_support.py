"""Helpers the real-server tests share: llama.cpp endpoints, running the evalkit CLI, reading run directories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def get_json(url: str, body: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
    """GET (or POST `body` to) a llama.cpp endpoint and decode its JSON."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def run_evalkit(args: list[str], cwd: Path, timeout_s: float = 900.0) -> subprocess.CompletedProcess[str]:
    """Run the `evalkit` CLI of this interpreter; its output is echoed so the figures show under `pytest -s`."""
    cmd = [sys.executable, "-m", "evalkit", *args]
    print(f"\n[realserver] $ evalkit {' '.join(args)}")
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "EVALKIT_DATA_DIR": str(data_dir())},
    )
    print(proc.stdout[-6000:])
    if proc.stderr.strip():
        print(proc.stderr[-3000:])
    return proc


def data_dir() -> Path:
    """The shared datasets (never copied into the repo)."""
    return Path(os.environ.get("EVALKIT_DATA_DIR") or REPO.parent / "shared" / "datasets")


def run_dir_from(proc: subprocess.CompletedProcess[str]) -> Path:
    """The run directory, printed as the last line of standard output (contract)."""
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines, "evalkit printed nothing"
    return Path(lines[-1].strip())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All JSON lines of a file."""
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
