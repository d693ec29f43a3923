"""Arrivals and shaping (issue 31 item 5) and the precision stop's interval (item 7), without a server: gamma gaps'
coefficient of variation, bursts, a ramp-up, stages, seeds, the order-statistic interval; bad flags exit 2."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from scipy.stats import binom

from evalkit.cli import main
from evalkit.load.arrivals import parse_stages
from evalkit.load.precision import PrecisionStop, quantile_ci, relative_moe
from evalkit.load.schedule import PointPlan, PointSpec
from evalkit.load.workload import Lengths, Workload

WL = Workload(Lengths(20, 20), Lengths(10, 10))


def plan(rate: float = 100.0, n: int | None = 10_000, **kw: object) -> PointPlan:
    seed = int(kw.pop("seed", 1))  # type: ignore[call-overload]  # an int when given
    fields: dict[str, object] = {"warmup": 0, "measured": n, "duration_s": None, **kw}
    return PointPlan(seed=seed, spec=PointSpec("rate", rate), workload=WL, **fields)  # type: ignore[arg-type]  # test keywords


def gaps(offsets: list[float]) -> list[float]:
    return [b - a for a, b in zip(offsets, offsets[1:])]


@pytest.mark.parametrize("burstiness", [0.25, 0.5, 1.0, 2.0, 4.0])
def test_gamma_cv_matches_the_setting_over_10000_requests(burstiness: float) -> None:
    g = gaps(plan(arrivals="gamma", burstiness=burstiness).send_offsets())
    assert len(g) == 9_999
    cv = statistics.pstdev(g) / statistics.mean(g)
    want = 1 / math.sqrt(burstiness)  # shape k = burstiness (vLLM): CV = 1/sqrt(k)
    assert abs(cv / want - 1) <= 0.05, (cv, want)
    assert abs(len(g) / sum(g) / 100.0 - 1) <= 0.05  # the mean rate holds


def test_constant_and_poisson_cv() -> None:
    assert statistics.pstdev(gaps(plan(arrivals="constant").send_offsets())) < 1e-9
    g = gaps(plan(arrivals="poisson").send_offsets())
    assert abs(statistics.pstdev(g) / statistics.mean(g) - 1) <= 0.05


def test_arrivals_are_seeded() -> None:
    a = plan(arrivals="gamma", burstiness=0.5, n=200).send_offsets()
    assert a == plan(arrivals="gamma", burstiness=0.5, n=200).send_offsets()
    assert a != plan(arrivals="gamma", burstiness=0.5, n=200, seed=2).send_offsets()
    assert a != plan(arrivals="gamma", burstiness=0.7, n=200).send_offsets()


def test_bursts_share_an_instant_and_keep_the_rate() -> None:
    offs = plan(rate=10.0, n=4000, arrivals="poisson", burst_size=4).send_offsets()
    for i in range(0, 4000, 4):
        assert len(set(offs[i : i + 4])) == 1
    assert offs[4] > offs[3]
    assert abs(4000 / offs[-1] / 10.0 - 1) <= 0.06


def test_ramp_up_is_linear_then_holds() -> None:
    # Λ(t) = R t^2 / (2T) over the ramp: R T / 2 requests in it, then R a second.
    offs = plan(rate=20.0, n=None, duration_s=30.0, ramp_up_s=10.0).send_offsets()
    in_ramp = [t for t in offs if t < 10.0]
    assert len(in_ramp) == 100
    assert all(abs(t - math.sqrt(2 * 10.0 * i / 20.0)) < 1e-9 for i, t in enumerate(in_ramp))
    first_half = sum(1 for t in in_ramp if t < 5.0)
    assert first_half == 25  # a quarter of the ramp's requests in its first half
    late = gaps([t for t in offs if t >= 10.0])
    assert all(abs(x - 0.05) < 1e-9 for x in late)


def test_stages_hold_their_rates_and_end() -> None:
    stages = tuple(parse_stages("2:5,2-10:5,10:2"))
    sched = plan(rate=10.0, n=None, stages=stages).send_schedule()
    per = [sum(1 for _, s in sched if s == k) for k in range(3)]
    assert per == [10, 30, 20]  # 2/s x 5 s, (2+10)/2 x 5 s, 10/s x 2 s
    assert max(t for t, _ in sched) < 12.0
    assert [t for t, s in sched if s == 0] == [i * 0.5 for i in range(10)]


def test_order_statistic_interval_matches_the_binomial() -> None:
    xs = [float(i) for i in range(1, 101)]
    lo, hi = quantile_ci(xs, 50)  # type: ignore[misc]  # 100 samples bound a median
    # The classic 95% ranks of a median of 100: X(40) and X(61), coverage F(60) - F(39) >= 0.95.
    assert (lo, hi) == (40.0, 61.0)
    assert binom.cdf(60, 100, 0.5) - binom.cdf(39, 100, 0.5) >= 0.95
    assert quantile_ci(xs, 99) is None  # 100 samples cannot bound a p99 from above
    assert quantile_ci([1.0] * 500, 99) == (1.0, 1.0)


def test_order_statistic_interval_covers() -> None:
    rng = random.Random(7)
    for q, n in ((50, 60), (90, 200), (95, 400)):
        hits = 0
        for _ in range(300):
            ci = quantile_ci([rng.expovariate(1.0) for _ in range(n)], q)
            assert ci is not None
            hits += ci[0] <= -math.log(1 - q / 100) <= ci[1]
        assert hits / 300 >= 0.92, (q, n, hits)


def test_precision_stop_needs_min_and_a_tight_interval() -> None:
    stop = PrecisionStop(0.05, "e2e_p50", min_requests=30, max_requests=100)
    tight = [{"outcome": "correct", "e2e_s": 1.0 + 0.001 * (i % 7)} for i in range(40)]
    wide = [{"outcome": "correct", "e2e_s": float(1 + i % 37)} for i in range(40)]
    assert not stop.reached(tight[:29]) and stop.reached(tight)
    assert not stop.reached(wide)
    assert relative_moe([x["e2e_s"] for x in wide], 50) > 0.05  # type: ignore[operator]  # 40 samples bound it


@pytest.mark.parametrize(
    "flags",
    [
        ["--concurrency", "2", "--burst-size", "3"],
        ["--rate", "2", "--burstiness", "0.5"],  # not gamma
        ["--rate", "2", "--stages", "2:x"],
        ["--rate", "2", "--stages", "2:10", "--requests", "5"],
        ["--rate", "2", "--target-moe", "0%"],
        ["--rate", "2", "--target-moe", "5%", "--requests", "10"],
        ["--rate", "2", "--target-moe", "5%", "--moe-metric", "itl_p99"],
        ["--rate", "2", "--target-moe", "5%", "--min-requests", "50", "--max-requests", "40"],
        ["--concurrency", "2", "--max-concurrency", "1"],
    ],
)
def test_bad_shaping_flags_exit_2(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        rc = main(["load", "--dry-run", *flags])
    except SystemExit as e:
        rc = int(e.code or 0)
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_dry_run_shows_the_shaping(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["load", "--dry-run", "--rate", "5", "--arrivals", "gamma", "--burstiness", "0.5", "--requests", "20"]
    assert main([*args, "--max-concurrency", "2", "--max-prefill", "1"]) == 0
    out = capsys.readouterr().out
    assert "arrivals gamma, burstiness 0.5, max concurrency 2, max in prefill 1" in out.splitlines()[1]
    offs = [float(x.split()[2]) for x in out.splitlines()[3:]]
    want = plan(rate=5.0, n=20, warmup=5, seed=42, arrivals="gamma", burstiness=0.5).send_offsets()
    assert offs == [round(t, 4) for t in want]


def test_stress_reports_the_token_split_only_when_the_server_reasoned() -> None:
    from evalkit_stress.metrics import compute_metrics

    def line(reasoning: int, ttft: float, answer_at: float) -> dict[str, object]:
        where = {"scenario": "short_insert", "role": "short", "cycle": 1, "status": "ok", "t_sent": 0.0, "t_done": 1.0}
        return {**where, "ttft_s": ttft, "ttft_answer_s": answer_at, "reasoning_tokens": reasoning, "answer_tokens": 5}

    plain = compute_metrics([line(0, 0.1, 0.1)])
    assert "reasoning_tokens" not in plain and "short_insert_ttft_answer_s" not in plain
    m = compute_metrics([line(40, 0.1, 0.5), line(60, 0.2, 0.9)])
    assert m["short_insert_ttft_answer_s"]["max"] == 0.9 and m["reasoning_tokens"]["max"] == 60
