"""The one comparison rule (evalkit.comparison), checked against what it promises: identical draws called different
at most the level's share of the time at any pair of sample counts (the issue's lognormal sigma 0.5 at 4 against 18,
where the bootstrap of a tail ratio called 35-40%), real shifts found, Holm and the spending over looks holding the
whole family at the level, and "can't tell" where the counts cannot reach it."""

from __future__ import annotations

import random

import pytest
from scipy.stats import mannwhitneyu

from evalkit.comparison import (
    BETTER,
    UNKNOWN,
    WITHIN,
    WORSE,
    compare_paired,
    compare_samples,
    compare_stratified,
    holm,
    holm_levels,
    look_level,
    rank_p,
    shift_interval,
    smallest_p,
)


@pytest.mark.parametrize("m,n", [(4, 18), (6, 6), (18, 18), (3, 12), (40, 55)])
def test_identical_draws_are_called_different_at_most_the_level(m: int, n: int) -> None:
    rng = random.Random(m * 100 + n)
    trials, calls = 2000, 0
    for _ in range(trials):
        a = [rng.lognormvariate(0, 0.5) for _ in range(m)]
        b = [rng.lognormvariate(0, 0.5) for _ in range(n)]
        calls += compare_samples(a, b, higher_is_better=False).beyond
    # binomial sd of a 5% rate over 2,000 trials is 0.5%: 6.5% is three of them above the level
    assert calls / trials <= 0.065, calls / trials


@pytest.mark.parametrize("m,n", [(5, 7), (12, 12), (30, 70)])
def test_p_value_equals_scipy_exact(m: int, n: int) -> None:
    rng = random.Random(7)
    a = [rng.gauss(0, 1) for _ in range(m)]
    b = [rng.gauss(0.5, 1) for _ in range(n)]
    assert rank_p(a, b) == pytest.approx(mannwhitneyu(b, a, method="exact").pvalue, rel=1e-6)


def test_a_real_shift_is_found_and_its_direction_named() -> None:
    rng = random.Random(3)
    before = [rng.lognormvariate(0, 0.1) for _ in range(18)]
    slower = [1.3 * rng.lognormvariate(0, 0.1) for _ in range(18)]
    c = compare_samples(before, slower, higher_is_better=False)
    assert c.mark == WORSE and c.p is not None and c.p < 0.001 and c.ratio == pytest.approx(1.3, rel=0.1)
    assert compare_samples(before, slower, higher_is_better=True).mark == BETTER
    lo, hi = shift_interval(before, slower) or (0, 0)
    assert lo < 1.3 < hi


def test_too_few_samples_say_cant_tell_with_what_would_tell() -> None:
    c = compare_samples([100.0, 100.1, 99.9], [120.0, 120.2, 119.9], higher_is_better=True)
    assert c.mark == UNKNOWN and c.why is not None and "needs 5 against 3" in c.why
    assert smallest_p(3, 3) == pytest.approx(0.1)
    assert compare_samples([100.0] * 5, [120.0] * 5, True).mark == BETTER


def test_the_noise_floor_holds_a_tiny_sure_change() -> None:
    before = [100.0 + i * 0.001 for i in range(30)]
    after = [101.0 + i * 0.001 for i in range(30)]  # +1%, perfectly separated
    assert compare_samples(before, after, True).mark == WITHIN
    assert compare_samples(before, after, True, noise_floor=0.005).mark == BETTER


def test_holm_levels_and_family() -> None:
    assert holm_levels([0.01, 0.02, None, 0.5, 0.001]) == pytest.approx([0.05 / 3, 0.05 / 2, 0.05, 0.05, 0.05 / 4])
    rng = random.Random(11)
    trials, any_call = 600, 0
    for _ in range(trials):
        fam = [
            compare_samples([rng.random() for _ in range(12)], [rng.random() for _ in range(12)], True)
            for _ in range(6)
        ]
        any_call += any(c.beyond for c in holm(fam, [True] * 6))
    assert any_call / trials <= 0.075, any_call / trials


def test_spending_over_looks_adds_up_to_the_level() -> None:
    shares = [look_level(0.05, k, 18, first_look=3) for k in range(3, 19)]
    assert sum(shares) == pytest.approx(0.05)
    assert shares[0] < 0.001 < shares[-1]
    assert look_level(0.05, 2, 18, first_look=3) == 0.0


def test_stratified_reaches_where_one_stratum_cannot() -> None:
    strata = [([100.0, 100.2, 99.9], [116.0, 116.1, 115.9])] * 3
    c = compare_stratified(strata, higher_is_better=True)
    assert c.mark == BETTER and c.p == pytest.approx(2 * (1 / 20) ** 3)
    same = [([100.0, 100.2, 99.9], [100.1, 99.95, 100.15])] * 3
    assert compare_stratified(same, higher_is_better=True).mark == WITHIN


def test_paired_rounds_need_six_and_then_decide() -> None:
    before = [1.0, 1.1, 1.0, 1.05, 1.0]
    after = [x * 1.1 for x in before]
    assert compare_paired(before, after, True).mark == UNKNOWN  # 5 rounds: 2/32 > 0.05
    assert compare_paired([*before, 1.02], [*after, 1.12], True).mark == BETTER


def test_paired_rounds_read_at_a_smaller_share_say_cant_tell() -> None:
    before = [1.0, 1.1, 1.0, 1.05, 1.0, 1.02]
    c = compare_paired(before, [x * 1.1 for x in before], True)
    assert c.mark == BETTER
    assert c.at_level(0.02).mark == UNKNOWN  # 6 rounds reach 0.031 at best: a Holm share of 0.02 cannot be met
