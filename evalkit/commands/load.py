"""`evalkit load`: latency, goodput and answers under closed- or open-loop load; with `--search`, the largest load
that meets every `--slo` target.

Closed loop: `--concurrency N` streams. Open loop: `--rate R` requests a second, `--arrivals constant|poisson`
(the gaps drawn from the seed), send times fixed in advance on absolute times. `--requests N` or `--duration S`
measured per point after `--warmup` requests that are not counted. `--search concurrency|rate` doubles the load
from the start (`--concurrency`/`--rate`, default 1) until a point fails, then bisects; every point runs `--runs`
times. Load runs do not resume: an existing `--name` is refused.
"""

from __future__ import annotations

import argparse
import sys
from typing import cast

from evalkit.cli import add_output_options, add_server_options
from evalkit.commands import load_workloads
from evalkit.commands.load_shaping import add_shaping_arguments, check_shaping, shaping, stage_rate
from evalkit.commands.target_flags import run_options_from_args, target_from_args
from evalkit.config.argtypes import (
    MAX_REQUESTS,
    any_int,
    bounded_int,
    nonneg_int,
    positive_float,
    positive_int,
    timeout_s,
)
from evalkit.errors import UsageError
from evalkit.load.client_hosts import join_cluster
from evalkit.load.measure import LoadMeasurement, LoadPlan, refuse_existing
from evalkit.load.points import ClientHostsPlan, PointsPlan, PointTemplate, short_figure
from evalkit.load.schedule import ARRIVALS, PointSpec, render_plan
from evalkit.load.summary_records import LoadSummaryJson
from evalkit.session.measurement import run_measurement

MAX_CLIENT_HOSTS = 256


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit load`."""
    add_server_options(p)
    add_output_options(p)
    g = p.add_argument_group("load")
    g.add_argument("--concurrency", type=positive_int, help="closed loop: this many streams (with --search: the start)")
    g.add_argument("--rate", type=positive_float, help="open loop: requests per second (with --search: the start)")
    g.add_argument(
        "--arrivals",
        choices=ARRIVALS,
        default="constant",
        help="open loop: evenly spaced, Poisson or gamma (--burstiness) gaps drawn from the seed (default constant)",
    )
    g.add_argument(
        "--requests",
        type=bounded_int(1, MAX_REQUESTS),
        help=f"measured requests per point (default 50 unless --duration; at most {MAX_REQUESTS:,})",
    )
    g.add_argument("--duration", type=positive_float, help="measured seconds per point, instead of --requests")
    g.add_argument(
        "--warmup",
        type=nonneg_int,
        help="requests sent first and not counted (default: the concurrency, or one second of the rate, at least 2)",
    )
    g.add_argument("--seed", type=any_int, default=42, help="fixes every prompt, length and arrival (default 42)")
    g.add_argument("--dry-run", action="store_true", help="print the plan of the (first) point and exit; no server")
    w = p.add_argument_group("requests")
    w.add_argument("--prompt-tokens", default="256", help="prompt length in tokens: N or LO:HI (default 256)")
    w.add_argument("--output-tokens", default="64", help="answer length in tokens: N or LO:HI (default 64)")
    w.add_argument("--prefix-tokens", type=nonneg_int, default=0, help="a prefix of P tokens every request shares")
    w.add_argument(
        "--token-scale",
        type=positive_float,
        help="the server's tokens per token of the sim's rule (default: "
        "measured from the server at the start; --dry-run: 1, or the manifest's token_scale)",
    )
    w.add_argument("--timeout-s", type=timeout_s, default=300.0, help="per-request timeout in seconds (default 300)")
    s = p.add_argument_group("targets and search")
    s.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="TARGET",
        help="a target such as 'ttft_p99_s<=2', 'itl_p99_ms<=100', errors==0 (repeatable; quote < and >)",
    )
    s.add_argument("--search", choices=("concurrency", "rate"), help="find the largest load meeting every --slo")
    s.add_argument("--runs", type=positive_int, default=1, help="repeats of every load point (default 1)")
    s.add_argument(
        "--search-max", type=positive_float, help="largest load the search tries (default 256 streams or 1000/s)"
    )
    s.add_argument(
        "--resolution",
        type=positive_float,
        default=0.1,
        help="rate search: stop when the bracket is this fraction of the rate (default 0.1)",
    )
    load_workloads.add_arguments(p)  # --trace, --conversations, --shared-prefix (issue 31)
    add_shaping_arguments(p)
    h = p.add_argument_group("many hosts (docs/cluster.md)")
    h.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="send an open-loop load (--rate) from --client-hosts hosts of the Ray cluster at ADDRESS (auto: the "
        "local one); needs pip install 'evalkit[cluster]'",
    )
    h.add_argument(
        "--client-hosts",
        type=bounded_int(1, MAX_CLIENT_HOSTS),
        metavar="N",
        help="with --ray: this many hosts send, one Ray actor on each",
    )


def _mode(args: argparse.Namespace) -> tuple[str, float]:
    if args.search:
        start = args.concurrency if args.search == "concurrency" else args.rate
        other = args.rate if args.search == "concurrency" else args.concurrency
        if other is not None:
            raise UsageError(f"--search {args.search} takes its start from --{args.search}, not the other flag")
        return args.search, float(start or 1)
    if (args.concurrency is None) == (args.rate is None):
        raise UsageError("give exactly one of --concurrency N or --rate R (or --search)")
    return ("concurrency", float(args.concurrency)) if args.concurrency is not None else ("rate", float(args.rate))


MAX_DURATION_S = 86_400.0  # load --duration: a day a point


def _check(args: argparse.Namespace, mode: str, load: float) -> None:
    if load <= 0 or (mode == "concurrency" and load != int(load)):
        raise UsageError(f"--{mode} must be a positive {'integer' if mode == 'concurrency' else 'number'}")
    if args.requests is not None and args.duration is not None:
        raise UsageError("give --requests or --duration, not both")
    if (args.requests is not None and args.requests < 2) or (args.duration is not None and args.duration <= 0):
        raise UsageError("--requests must be at least 2 and --duration positive")
    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    if args.duration is not None and args.duration > MAX_DURATION_S:
        raise UsageError(f"--duration {args.duration:g} is over a day ({MAX_DURATION_S:g} s), the most a point may run")
    if args.duration is not None and mode == "rate" and load * args.duration > MAX_REQUESTS:
        # the plan is made before anything is sent: rate x duration requests, held to --requests' own bound
        raise UsageError(
            f"--rate {load:g} x --duration {args.duration:g} is {load * args.duration:,.0f} requests a point, over "
            f"the {MAX_REQUESTS:,} a point may send"
        )
    if args.search and not args.slo:
        raise UsageError("--search needs at least one --slo target")
    if args.token_scale is not None and args.token_scale <= 0:
        raise UsageError("--token-scale must be positive")
    if args.prefix_tokens < 0 or (args.warmup is not None and args.warmup < 0):
        raise UsageError("--prefix-tokens and --warmup cannot be negative")
    check_shaping(args, mode)


def _template(args: argparse.Namespace) -> PointTemplate:
    """What every point of the run shares, from the flags."""
    return PointTemplate(
        arrivals=args.arrivals,
        warmup=args.warmup,
        requests=args.requests,
        duration_s=args.duration,
        shaping=shaping(args),
    )


def _check_hosts(args: argparse.Namespace) -> ClientHostsPlan | None:
    """`--ray ADDRESS --client-hosts N` as a plan, or one line naming what it cannot go with."""
    if args.ray is None:
        if args.client_hosts is not None:
            raise UsageError("--client-hosts needs --ray ADDRESS (the Ray cluster whose hosts send)")
        return None
    if args.client_hosts is None:
        raise UsageError("--ray needs --client-hosts N: how many hosts send")
    if load_workloads.wanted(args):
        raise UsageError(
            "--ray sends the points of --rate; --trace, --conversations and --shared-prefix run from one host"
        )
    closed = args.search == "concurrency" or (not args.search and args.concurrency is not None)
    single = [
        flag
        for flag, given in (
            ("--concurrency", closed),
            ("--max-concurrency", args.max_concurrency is not None),
            ("--max-prefill", args.max_prefill is not None),
            ("--target-moe", args.target_moe is not None),
        )
        if given
    ]
    if args.client_procs != 1:
        raise UsageError("--client-procs with --ray: each client host sends from one process; add hosts instead")
    if single:
        raise UsageError(
            f"--ray splits an open-loop schedule (--rate) over hosts; {single[0]} needs one host's view of every "
            "request in flight, so it runs without --ray"
        )
    return ClientHostsPlan(args.ray, args.client_hosts)


def run(args: argparse.Namespace) -> int:
    """Run `evalkit load` (or print the first point's plan with `--dry-run`)."""
    hosts = _check_hosts(args)
    if load_workloads.wanted(args):
        return load_workloads.run(args)
    stage_rate(args)
    mode, load = _mode(args)
    _check(args, mode, load)
    plan = PointsPlan(
        mode=mode,
        start=load,
        template=_template(args),
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        prefix_tokens=args.prefix_tokens,
        slo=tuple(args.slo),
        runs=args.runs,
        search=bool(args.search),
        search_max=args.search_max,
        resolution=args.resolution,
        token_scale=args.token_scale,
        timeout_s=args.timeout_s,
        hosts=hosts,
    )  # a bad target, then a bad length, is one line here
    if args.dry_run:
        first = plan.template.plan(plan.workload, PointSpec(mode, load), args.seed)
        sys.stdout.write(render_plan(first))
        if args.search:
            sys.stdout.write(f"# --search {mode}: later points depend on the results of this one\n")
        return 0
    refuse_existing(args.out, args.name, args.fresh)
    if hosts is not None:
        join_cluster(hosts.address, hosts.count)  # a cluster too small is one line before the run exists
    measurement = LoadMeasurement(LoadPlan(plan, seed=args.seed))
    return run_measurement(
        target_from_args(args),
        run_options_from_args(args),
        measurement,
        lambda s: print(points_table(cast(LoadSummaryJson, s.to_json())), flush=True),
    )


def points_table(s: LoadSummaryJson) -> str:
    """The table of a points run: a row per load, then whether it meets the targets (or the largest that does)."""
    head = [
        "load",
        "ttft p50/p99 s",
        "itl p99 ms",
        "e2e p99 s",
        "goodput/s",
        "err",
        "wrong",
        "lateness p95 ms",
        "meets",
        "valid",
    ]
    reasoned = any(p["metrics"]["reasoning_tokens"]["max"] for p in s["points"])
    if reasoned:
        head.insert(2, "answer ttft p50/p99 s")
    rows = [head]
    for p in s["points"]:
        m = p["metrics"]
        late = m["send_lateness_s"]["p95"]
        answer = (
            [f"{short_figure(m['ttft_answer_s']['p50'])}/{short_figure(m['ttft_answer_s']['p99'])}"] if reasoned else []
        )
        rows.append(
            [
                p["label"],
                f"{short_figure(m['ttft_s']['p50'])}/{short_figure(m['ttft_s']['p99'])}",
                *answer,
                short_figure(m["itl_ms"]["p99"]),
                short_figure(m["e2e_s"]["p99"]),
                short_figure(m["goodput_rps"]),
                str(m["errors"]),
                str(m["wrong_answers"]),
                short_figure(None if late is None else late * 1000),
                ("yes" if p["meets_slo"] else "no") if s["slo"] else "-",  # no --slo: nothing to meet
                "yes" if p["valid"] else "no",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    if s["slo"] and not s["search"]:
        out.append(f"meets {', '.join(t['slo'] for t in s['slo'])}: {'yes' if s['points'][0]['meets_slo'] else 'no'}")
    elif s["slo"]:
        best = s["max_load_meeting_slo"]
        out.append(
            f"largest {s['mode']} meeting {', '.join(t['slo'] for t in s['slo'])}: "
            f"{short_figure(best, 6)}" + ("" if s["bounded"] else " (the largest tried: not bounded)")
        )
    return "\n".join(out)
