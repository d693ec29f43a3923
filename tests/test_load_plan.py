"""`evalkit load` without a server: targets, the search's logic, the seeded plan, and `--dry-run` byte for byte."""

from __future__ import annotations

import pytest

from evalkit.cli import main
from evalkit.client.tokens import count_tokens
from evalkit.errors import UsageError
from evalkit.load.schedule import PointPlan, PointSpec
from evalkit.load.search import search_max
from evalkit.load.slo import parse_target, request_meets
from evalkit.load.workload import Lengths, Workload
from evalkit.sim.questions import stress_question


def dry_run(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `evalkit load --dry-run FLAGS`, in this process."""
    try:
        rc = main(["load", "--dry-run", *flags])
    except SystemExit as e:  # argparse's own errors
        rc = int(e.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize(
    "text, metric, stat, scale, op, limit",
    [
        ("ttft_p99_s<=2", "ttft_s", "p99", 1.0, "<=", 2.0),
        ("ttft_p50_ms < 300", "ttft_s", "p50", 1000.0, "<", 300.0),
        ("itl_p99_ms<=100", "itl_ms", "p99", 1.0, "<=", 100.0),
        ("itl_max_s<=0.5", "itl_ms", "max", 0.001, "<=", 0.5),
        ("e2e_p95_s<=10", "e2e_s", "p95", 1.0, "<=", 10.0),
        ("errors==0", "errors", None, 1.0, "==", 0.0),
        ("wrong_answers==0", "wrong_answers", None, 1.0, "==", 0.0),
        ("goodput_rps>=1.5", "goodput_rps", None, 1.0, ">=", 1.5),
    ],
)
def test_parse_target(text: str, metric: str, stat: str | None, scale: float, op: str, limit: float) -> None:
    t = parse_target(text)
    assert (t.metric, t.stat, t.scale, t.op, t.limit) == (metric, stat, scale, op, limit)


@pytest.mark.parametrize("text", ["ttft<=2", "ttft_p99_s=<2", "ttft_p42_s<=2", "latency_p99_s<=1", "errors==x"])
def test_bad_target_is_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        parse_target(text)


def test_target_reads_point_in_its_unit() -> None:
    metrics = {"ttft_s": {"p99": 0.25}, "itl_ms": {"p99": 40.0}, "errors": 0}
    assert parse_target("ttft_p99_ms<=300").met(metrics)
    assert not parse_target("ttft_p99_ms<=200").met(metrics)
    assert parse_target("itl_p99_s<=0.05").met(metrics)
    assert not parse_target("e2e_p99_s<=9").met(metrics)  # missing figure never meets


@pytest.mark.parametrize(
    "line, ok",
    [
        ({"status": "ok", "outcome": "correct", "ttft_s": 0.5, "e2e_s": 2, "chunk_times": [0, 0.01, 0.02]}, True),
        ({"status": "ok", "outcome": "correct", "ttft_s": 1.5, "e2e_s": 2, "chunk_times": [0, 0.01, 0.02]}, False),
        ({"status": "ok", "outcome": "correct", "ttft_s": 0.5, "e2e_s": 2, "chunk_times": [0, 0.2, 0.21]}, False),
        ({"status": "ok", "outcome": "wrong", "ttft_s": 0.5, "e2e_s": 2, "chunk_times": [0, 0.01]}, False),
        ({"status": "error", "outcome": "error", "ttft_s": None, "e2e_s": 2}, False),
    ],
)
def test_request_meets_its_targets(line: dict, ok: bool) -> None:
    targets = [parse_target("ttft_p99_s<=1"), parse_target("itl_max_ms<=100"), parse_target("errors==0")]
    assert request_meets(line, targets) is ok


@pytest.mark.parametrize(
    "true_max, start, top, integer, expect",
    [
        (4, 1, 256, True, 4),
        (5, 1, 256, True, 5),
        (1, 1, 256, True, 1),
        (0, 1, 256, True, None),
        (300, 1, 256, True, 256),
        (7, 4, 64, True, 7),
        (2, 4, 64, True, 2),
    ],
)
async def test_search_finds_the_largest_passing_load(
    true_max: float, start: float, top: float, integer: bool, expect: float | None
) -> None:
    tried: list[float] = []

    async def measure(load: float) -> bool:
        tried.append(load)
        return load <= true_max

    res = await search_max(measure, start, top, integer)
    assert res.best == expect
    assert res.bounded == (true_max < top)
    assert len(tried) == len(set(tried))  # no load is measured twice


async def test_rate_search_to_resolution() -> None:
    async def measure(load: float) -> bool:
        return load <= 13.7

    res = await search_max(measure, 1.0, 1000.0, integer=False, resolution=0.05)
    assert res.best is not None and res.first_failing is not None
    assert res.best <= 13.7 < res.first_failing
    assert res.first_failing - res.best <= 0.05 * res.best


def test_requests_ask_a_checkable_count_of_the_asked_length() -> None:
    wl = Workload(Lengths(300, 300), Lengths(80, 80), prefix_tokens=120)
    plan = PointPlan(seed=7, spec=PointSpec("concurrency", 4), workload=wl, warmup=2, measured=20, duration_s=None)
    reqs = [plan.request(i) for i in range(12)]
    prefixes = {r.prompt[:200] for r in reqs}
    assert len(prefixes) == 1  # the shared prefix
    assert len({r.prompt for r in reqs}) == 12
    for r in reqs:
        assert r.prompt_tokens == 300 == count_tokens(r.prompt) + 6
        assert abs(r.output_tokens - 80) <= 9
        q = stress_question(r.prompt)
        assert q is not None and q.kind == "stress_generation" and q.gold == r.count_to
    # Requests in flight together (neighbours in the sequence) never share an answer.
    assert all(reqs[i].expected != reqs[i + k].expected for i in range(4) for k in range(1, 8))


def test_poisson_offsets_seeded_and_at_the_rate() -> None:
    wl = Workload(Lengths(100, 100), Lengths(10, 10))
    plan = PointPlan(
        seed=3, spec=PointSpec("rate", 50.0), workload=wl, warmup=0, measured=4000, duration_s=None, arrivals="poisson"
    )
    offs = plan.send_offsets()
    assert offs == plan.send_offsets()
    assert offs == sorted(offs) and len(offs) == 4000
    assert abs((len(offs) - 1) / offs[-1] / 50.0 - 1) < 0.06
    other = PointPlan(
        seed=4, spec=PointSpec("rate", 50.0), workload=wl, warmup=0, measured=4000, duration_s=None, arrivals="poisson"
    )
    assert other.send_offsets() != offs


def test_duration_bound_open_loop_plan() -> None:
    wl = Workload(Lengths(100, 100), Lengths(10, 10))
    plan = PointPlan(seed=1, spec=PointSpec("rate", 5.0), workload=wl, warmup=5, measured=None, duration_s=2.0)
    offs = plan.send_offsets()
    assert len(offs) == 5 + 10 and offs[5] == 1.0 and offs[-1] == pytest.approx(2.8)
    assert [plan.phase(i) for i in (4, 5, 14)] == ["warmup", "measured", "measured"]


def test_dry_run_is_byte_identical_for_the_same_seed(capsys: pytest.CaptureFixture[str]) -> None:
    flags = [
        "--rate",
        "3",
        "--arrivals",
        "poisson",
        "--requests",
        "20",
        "--prompt-tokens",
        "100:400",
        "--output-tokens",
        "16:64",
        "--prefix-tokens",
        "50",
    ]
    a, b = dry_run(capsys, *flags, "--seed", "9"), dry_run(capsys, *flags, "--seed", "9")
    c = dry_run(capsys, *flags, "--seed", "10")
    assert a[0] == b[0] == c[0] == 0, a[2]
    assert a[1] == b[1]
    assert a[1] != c[1]
    assert len(a[1].splitlines()) == 3 + 3 + 20  # header lines + 3 warm-up + 20 measured


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--concurrency", "2", "--rate", "1"],
        ["--concurrency", "0"],
        ["--rate", "1", "--prompt-tokens", "x"],
        ["--search", "concurrency"],
        ["--concurrency", "2", "--requests", "5", "--duration", "3"],
        ["--search", "rate", "--concurrency", "2", "--slo", "errors==0"],
    ],
)
def test_bad_flags_exit_2(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = dry_run(capsys, *flags)
    assert rc == 2, out + err
    assert "error" in err and "Traceback" not in err


def test_token_scale_fits_prompts_to_the_servers_tokens() -> None:
    plain = Workload(Lengths(400, 400), Lengths(20, 20), prefix_tokens=100)
    scaled = Workload(Lengths(400, 400), Lengths(20, 20), prefix_tokens=100, token_scale=2.0)
    for wl, local in ((plain, 400), (scaled, 200)):
        r = PointPlan(seed=1, spec=PointSpec("rate", 1.0), workload=wl, warmup=0, measured=3, duration_s=None).request(
            0
        )
        assert count_tokens(r.prompt) + 6 == local
        assert r.prompt_tokens == 400  # in the server's tokens
