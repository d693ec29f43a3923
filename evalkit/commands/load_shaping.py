"""`evalkit load`'s arrival shaping, caps and precision stop: the flags, their checks, and what they set on a plan.

Kept beside `commands/load.py` so the load command itself only calls in: `add_shaping_arguments`, `check_shaping`
and `shaping` (the points' `ArrivalShaping`, which the manifest records).
"""

from __future__ import annotations

import argparse
import math

from evalkit.config.argtypes import nonneg_float, nonneg_int, positive_float, positive_int
from evalkit.errors import UsageError
from evalkit.load.arrivals import parse_stages
from evalkit.load.points import ArrivalShaping
from evalkit.load.precision import PrecisionStop, check_metric, parse_moe


def add_shaping_arguments(p: argparse.ArgumentParser) -> None:
    """Flags for bursts, ramps, stages, caps and `--target-moe`."""
    g = p.add_argument_group("arrival shaping and caps (open loop unless said)")
    g.add_argument(
        "--burstiness",
        type=positive_float,
        default=1.0,
        help="--arrivals gamma: the gamma shape, as vLLM's --burstiness (gaps' CV = 1/sqrt(B); "
        "below 1 burstier than Poisson, above 1 more even; default 1)",
    )
    g.add_argument(
        "--burst-size", type=positive_int, default=1, help="send this many requests at each arrival (mean rate kept)"
    )
    g.add_argument("--ramp-up", type=nonneg_float, default=0.0, help="raise the rate linearly from 0 over S seconds")
    g.add_argument(
        "--stages",
        help="a multi-stage profile instead of one rate: RATE:SECONDS[,...], a ramp FROM-TO:SECONDS "
        "(e.g. 2:30,2-8:10,8:60); the point ends with the last stage",
    )
    g.add_argument(
        "--max-concurrency", type=positive_int, help="with --rate: hold a send while this many are in flight"
    )
    g.add_argument(
        "--max-prefill",
        type=positive_int,
        help="hold a send while this many requests are sent and still without a first token (both loops)",
    )
    g.add_argument(
        "--reasoning-room",
        type=nonneg_int,
        default=0,
        help="tokens added to every request's max_tokens, for a server that reasons before it answers (default 0)",
    )
    s = p.add_argument_group("stop on precision")
    s.add_argument(
        "--target-moe",
        help="end a point once the watched percentile's 95%% interval half-width is within this share of it "
        "(e.g. 5%%); the point's measured count then lies between --min-requests and --max-requests",
    )
    s.add_argument(
        "--moe-metric", default="ttft_p95", help="the percentile watched: <ttft|ttft_answer|e2e>_pNN (default ttft_p95)"
    )
    s.add_argument("--min-requests", type=positive_int, default=30, help="--target-moe: at least this many (30)")
    s.add_argument("--max-requests", type=positive_int, default=1000, help="--target-moe: at most this many (1000)")


def stage_rate(args: argparse.Namespace) -> None:
    """`--stages` alone names an open-loop point: its rate is then the stages' highest (the point's label)."""
    if args.stages is not None and args.rate is None and args.concurrency is None and not args.search:
        args.rate = max(st.rate for st in parse_stages(args.stages))


def check_shaping(args: argparse.Namespace, mode: str) -> None:
    """Refuse combinations that make no sense, naming the flag."""
    rate_only = {
        "--burst-size": args.burst_size != 1,
        "--ramp-up": bool(args.ramp_up),
        "--stages": args.stages is not None,
        "--max-concurrency": args.max_concurrency is not None,
        "--burstiness": args.burstiness != 1.0,
    }
    if mode != "rate":
        given = [k for k, v in rate_only.items() if v]
        if given:
            raise UsageError(f"{', '.join(given)} shape open-loop arrivals: give --rate")
    if args.burstiness != 1.0 and args.arrivals != "gamma":
        raise UsageError("--burstiness is the shape of --arrivals gamma")
    if not math.isfinite(args.ramp_up):
        raise UsageError("--ramp-up must be a finite number of seconds")
    if args.stages is not None:
        parse_stages(args.stages)
        if args.search or args.duration is not None or args.requests is not None or args.ramp_up:
            raise UsageError("--stages sets the point's length: not with --search, --duration, --requests or --ramp-up")
    if args.target_moe is not None:
        parse_moe(args.target_moe)
        check_metric(args.moe_metric)
        if args.requests is not None or args.duration is not None or args.stages is not None:
            raise UsageError(
                "--target-moe sets the count: give --min-requests/--max-requests, not --requests/--duration"
            )
        if args.min_requests > args.max_requests:
            raise UsageError("--min-requests is above --max-requests")


def precision(args: argparse.Namespace) -> PrecisionStop | None:
    """The precision stop the flags ask for."""
    if args.target_moe is None:
        return None
    return PrecisionStop(
        parse_moe(args.target_moe), check_metric(args.moe_metric), args.min_requests, args.max_requests
    )


def shaping(args: argparse.Namespace) -> ArrivalShaping:
    """The shaping the flags ask for (what a point's plan and the manifest take of them)."""
    return ArrivalShaping(
        burstiness=args.burstiness,
        burst_size=args.burst_size,
        ramp_up_s=args.ramp_up,
        stages=tuple(parse_stages(args.stages)) if args.stages else (),
        max_concurrency=args.max_concurrency,
        max_prefill=args.max_prefill,
        precision=precision(args),
        reasoning_room=args.reasoning_room,
    )
