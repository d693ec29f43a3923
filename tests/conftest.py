"""Shared fixtures: the datasets' location and a factory of `evalkit sim` subprocesses stopped at teardown."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evalkit.clock import Clock
from evalkit.sim.launch import SimProcess, start_sim

REPO = Path(__file__).resolve().parent.parent
SHARED_DATASETS = REPO.parent / "shared" / "datasets"


def pytest_configure(config: pytest.Config) -> None:
    """Point EVALKIT_DATA_DIR at ../shared/datasets unless the caller set it (datasets are never copied in)."""
    if not os.environ.get("EVALKIT_DATA_DIR") and SHARED_DATASETS.is_dir():
        os.environ["EVALKIT_DATA_DIR"] = str(SHARED_DATASETS)
    # Sims reuse ports with other settings: a cached field support of an earlier one would be wrong for the next
    # (tests/test_strict_server.py tests the cache in a directory of its own).
    os.environ.setdefault("EVALKIT_NO_FIELD_CACHE", "1")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The capability datasets' directory ($EVALKIT_DATA_DIR, by default <repo>/../shared/datasets)."""
    return Path(os.environ.get("EVALKIT_DATA_DIR") or SHARED_DATASETS)


@pytest.fixture(scope="session")
def demo_report(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """The README's demo run once per session (1 cycle, 1 question a dataset, stress at 20x): its report.md path.
    tests/test_demo.py checks the runs, tests/test_report_page.py the page in a browser."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("demo")
    argv = ["demo", "--out", str(out), "--name", "d", "--cycles", "1", "--limit", "1", "--time-scale", "20"]
    p = subprocess.run(
        [sys.executable, "-m", "evalkit", *argv, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    paths = [ln.split(":", 1)[1].strip() for ln in p.stdout.splitlines() if ln.startswith("report: ")]
    assert len(paths) == 1, p.stdout[-3000:]
    report = Path(paths[0])
    assert report == out / "d" / "report.md"
    (out / "d" / "demo-stdout.txt").write_text(p.stdout)  # tests/test_demo.py reads the answer the terminal showed
    return report


@pytest.fixture
def sim() -> Iterator[Callable[..., SimProcess]]:
    """A factory: `sim("--time-scale", "50", ...)` starts an `evalkit sim` and returns its `SimProcess`
    (`clock=`: the sim stamps on that clock)."""
    started: list[SimProcess] = []

    def _start(*flags: str, clock: Clock | None = None) -> SimProcess:
        proc = start_sim(list(flags), clock=clock)
        started.append(proc)
        return proc

    yield _start
    for proc in started:
        proc.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the slow real-server integration tests after every unit test, so a unit failure shows first."""
    items.sort(key=lambda item: item.get_closest_marker("realserver") is not None)
