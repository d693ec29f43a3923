"""The built-in scenario file is today's cycle: its dry runs equal the outputs saved before the schedule moved into
a file (tests/cases/stress_dryrun/, written by `evalkit stress --dry-run` at commit b29d68b)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit_stress.scenario_file import builtin_scenarios
from evalkit_stress.scenarios import SCENARIOS
from evalkit_stress.schedule import build_schedule, render_schedule

CASES = Path(__file__).parent / "cases" / "stress_dryrun"

# (saved file, seed, cycles, long_tokens, shuffle, reuse_long_prompt, gen_tokens, time_scale)
SAVED = [
    ("seed_42_cycles_2.txt", 42, 2, 54000, False, False, 512, 1.0),
    ("seed_42_cycles_18.txt", 42, 18, 54000, False, False, 512, 1.0),
    ("seed_7_cycles_3.txt", 7, 3, 54000, False, False, 512, 1.0),
    ("seed_1_cycles_4_shuffle.txt", 1, 4, 54000, True, False, 512, 1.0),
    ("seed_42_cycles_3_reuselongprompt_timescale_20.txt", 42, 3, 54000, False, True, 512, 20.0),
    ("seed_123_cycles_2_gentokens_64_longtokens_2000.txt", 123, 2, 2000, False, False, 64, 1.0),
]


@pytest.mark.parametrize("name,seed,cycles,long_tokens,shuffle,reuse,gen_tokens,scale", SAVED)
def test_builtin_file_dry_run_is_byte_identical_to_the_saved_one(
    name: str, seed: int, cycles: int, long_tokens: int, shuffle: bool, reuse: bool, gen_tokens: int, scale: float
) -> None:
    s = build_schedule(seed, cycles, long_tokens, shuffle, reuse, gen_tokens)
    assert render_schedule(s, scale) == (CASES / name).read_text(encoding="utf-8")


def test_past_the_vocabulary_and_shuffled_still_identical() -> None:
    # 120 cycles need 480 long prompts, more than the 429 filler words: the numbered-word path is covered too.
    text = render_schedule(build_schedule(0, 120, 54000, shuffle=True))
    assert hashlib.sha256(text.encode()).hexdigest() == (CASES / "seed_0_cycles_120_shuffle.sha256").read_text().strip()


def test_cli_dry_run_seed_42_cycles_2_equals_the_saved_output() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "evalkit", "stress", "--dry-run", "--seed", "42", "--cycles", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == (CASES / "seed_42_cycles_2.txt").read_text(encoding="utf-8")


def test_builtin_file_names_the_write_up_scenarios_in_order() -> None:
    f = builtin_scenarios()
    assert f.builtin and f.names == SCENARIOS
    assert all(not s.expect for s in f.scenarios)
