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
