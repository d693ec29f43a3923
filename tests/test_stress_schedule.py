"""The stress schedule without a server: seeded, byte-identical dry runs, unique long prompts, distinct answers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evalkit.cli import main
from evalkit.client.prompts import LongSpec, local_token_count
from evalkit_stress.scenarios import SCENARIOS
from evalkit_stress.schedule import build_schedule, render_schedule


def dry_run(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalkit", "stress", "--dry-run", *flags], capture_output=True, text=True, timeout=60
    )


def test_same_seed_dry_runs_are_byte_identical_and_other_seeds_differ() -> None:
    a = dry_run("--cycles", "3", "--seed", "42")
    b = dry_run("--cycles", "3", "--seed", "42")
    c = dry_run("--cycles", "3", "--seed", "43")
    assert a.returncode == b.returncode == c.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    assert a.stdout != c.stdout
    assert "c3-short_baseline-short2" in a.stdout


def test_dry_run_shows_time_scaled_delays() -> None:
    s = build_schedule(42, 1, 54000)
    insert = next(r for r in s.requests() if r.scenario == "short_insert" and r.role == "short")
    assert f"+{insert.offset_s:.3f}s" in render_schedule(s, 1.0)
    assert f"+{insert.offset_s / 20:.3f}s" in render_schedule(s, 20.0)
    assert "time_scale=20" in render_schedule(s, 20.0)


def test_write_up_order_by_default_and_seeded_shuffle() -> None:
    plain = build_schedule(5, 4, 54000)
    assert [sc.name for sc in plain.cycle(2)] == list(SCENARIOS)
    shuffled = build_schedule(5, 4, 54000, shuffle=True)
    orders = [tuple(sc.name for sc in shuffled.cycle(c)) for c in range(1, 5)]
    assert all(sorted(o) == sorted(SCENARIOS) for o in orders)
    assert len(set(orders)) > 1
    assert orders == [tuple(sc.name for sc in build_schedule(5, 4, 54000, shuffle=True).cycle(c)) for c in range(1, 5)]


def test_delays_are_in_the_issue_ranges() -> None:
    s = build_schedule(9, 10, 54000)
    inserts = [
        r.offset_s for r in s.requests() if r.scenario in ("short_insert", "double_insert") and r.role == "short"
    ]
    cancels = [r.cancel_after_s for r in s.requests() if r.cancel_after_s is not None]
    assert len(inserts) == 30 and all(0.5 <= d <= 3.0 for d in inserts)
    assert len(set(inserts)) > 5
    assert len(cancels) == 10 and all(1.0 <= d <= 4.0 for d in cancels)


def test_each_long_prompt_differs_from_its_first_token() -> None:
    s = build_schedule(42, 18, 54000)
    specs = s.long_specs()
    assert len(specs) == 18 * 4
    texts = [spec.text(40) for spec in specs]
    first_tokens = [t.split()[0].rstrip(":") for t in texts]
    assert len(set(first_tokens)) == len(specs)
    assert len({sp.code for sp in specs}) == len(specs)
    assert all(f"The secret code is {sp.code}." in t for sp, t in zip(specs, texts))
    assert all(t.endswith("What is the secret code? Reply with only the code.") for t in texts)


def test_reuse_long_prompt_sends_one_prompt() -> None:
    specs = build_schedule(42, 3, 54000, reuse_long_prompt=True).long_specs()
    assert len(set(specs)) == 1


def test_requests_in_flight_together_never_share_an_answer() -> None:
    for sc in build_schedule(11, 30, 54000).scenarios:
        answers = [r.expected for r in sc.requests if r.role != "gen_solo"]
        assert len(answers) == len(set(answers)), sc


@pytest.mark.parametrize("sentences", [0, 10, 255, 256, 700])
def test_longer_prompts_extend_shorter_ones(sentences: int) -> None:
    spec = LongSpec("river", 123, "ABCD-EFGH-JKLM", 0.0)
    short, longer = spec.text(sentences), spec.text(sentences + 50)
    assert local_token_count(longer) > local_token_count(short)
    assert longer.startswith(short[: short.index("\n\n")].rsplit(" ", 1)[0])


@pytest.mark.parametrize("flags", [["--cycles", "0"], ["--time-scale", "0"], ["--long-tokens", "5"]])
def test_bad_flags_exit_2_with_one_line(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stress", "--dry-run", *flags]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
