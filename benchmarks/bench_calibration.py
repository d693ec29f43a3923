"""Calibration of evalkit's before/after calls (issue #54): A/A and A/B stress pairs on the sim, every figure scored.

Collect (`--collect DIR`): 18-cycle stress runs of the sim's `dual-2080ti-after` build, seeded, `--parallel` at a time:
- `aa`: the build as it is (its runs paired with each other: identical builds, measured at the same time);
- `loaded`: the same build while `--burners` busy loops hold the machine's cores (paired with `aa` runs: identical
  builds, the machine's load changed between baseline and candidate);
- `decode5`: the build with a 5% slower decode (`--decode-rate` and `--batch-decode-rate` x 0.95);
- `insert30`: the build with 30% longer prefill chunks (`--prefill-chunk` 1536 -> 1997: a short request inserted
  into a long prefill waits up to one chunk, so its first token's p95 moves by about 30%).

Read (`--read DIR`): each candidate against its baseline (an `aa` run of another seed), two ways:
- the fixed 18-cycle call, as the report makes it (evalkit.report.tables.stress_marks: every stress figure by the
  rank test, the pair's figures one Holm family at 5%), and the machine check the report and gate make;
- `--until-sure`, replayed cycle by cycle (an until-sure run is a prefix of the 18-cycle run of its seed): the stop,
  every figure call at every look before it (a false call at any look counts), the calls at the stop against the
  18-cycle ones, and the verdicts at the stop against the 18-cycle verdicts.
Printed: per pair kind, the share of pairs with any figure called beyond noise (A/A: false calls), how often the
planted change was called and in which direction, "can't tell" shares, and agreement.

    python benchmarks/bench_calibration.py --collect RUNS --parallel 24 --aa 120 --loaded 60 --decode5 60 --insert30 60
    python benchmarks/bench_calibration.py --read RUNS [--workers 16]
    python benchmarks/bench_calibration.py --quick    # a CI-sized run: 4 aa + 2 decode5 runs, read at once
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

CYCLES = 18
PROFILE = "dual-2080ti-after"
KINDS: dict[str, list[str]] = {
    "aa": [],
    "loaded": [],
    "decode5": ["--decode-rate", f"{116 * 0.95:.2f}", "--batch-decode-rate", f"{186 * 0.95:.2f}"],
    "insert30": ["--prefill-chunk", "1997"],
}
PLANTED = {"decode5": ("concurrent_combined_tok_s", "▼"), "insert30": ("short_insert_ttft_s", "▼")}
VERDICTS = ("head_of_line_blocking", "cancel_aborts", "effective_concurrency", "long_hurt_by_inserts")


def stress_run(out: Path, kind: str, seed: int, scale: str, long_tokens: int) -> Path:
    """One 18-cycle stress run of the build `kind` with the sim's log; its run directory."""
    from evalkit.sim.launch import start_sim

    name = f"{kind}-{seed}"
    log = out / f"{name}.log"
    flags = ["--profile", PROFILE, "--time-scale", scale, "--server-log-file", str(log), "--seed", str(seed)]
    with start_sim([*flags, *KINDS[kind]]) as sim:
        p = subprocess.run(
            [sys.executable, "-m", "evalkit", "stress", "--base-url", sim.base_url, "--out", str(out)]
            + ["--name", name, "--no-progress", "--cycles", str(CYCLES), "--seed", str(seed)]
            + ["--time-scale", scale, "--long-tokens", str(long_tokens), "--server-log", str(log)],
            capture_output=True,
            text=True,
        )
    if p.returncode not in (0, 1):
        raise RuntimeError(f"stress {name} exit {p.returncode}: {p.stderr[-500:]}")
    return out / name


BENCH_KINDS: dict[str, list[str]] = {"bench_aa": [], "bench_decode5": ["--decode-rate", f"{116 * 0.95:.2f}"]}


def bench_run(out: Path, kind: str, seed: int, scale: str) -> Path:
    """One `evalkit bench --runs 5` of the build `kind` (256 tokens a request); its run directory."""
    from evalkit.sim.launch import start_sim

    name = f"{kind}-{seed}"
    flags = ["--profile", PROFILE, "--time-scale", scale, "--seed", str(seed), *BENCH_KINDS[kind]]
    with start_sim(flags) as sim:
        p = subprocess.run(
            [sys.executable, "-m", "evalkit", "bench", "--base-url", sim.base_url, "--out", str(out)]
            + ["--name", name, "--runs", "5", "--max-tokens", "256"],
            capture_output=True,
            text=True,
        )
    if p.returncode not in (0, 1):
        raise RuntimeError(f"bench {name} exit {p.returncode}: {p.stderr[-500:]}")
    return out / name


def bench_rows(root: Path) -> list[str]:
    """Bench pairs (each `bench_aa` run against the next, each `bench_decode5` against an `bench_aa` run): the
    decode table's marks (Holm over the prompts), the answer line's stratified call, and a gate rule
    `bench.prompts.code.tok_s >= 0.97 x baseline`."""
    from evalkit import comparison
    from evalkit.gate import Rule, check, exit_code
    from evalkit.runs.summaries import load_runs

    runs = {
        k: sorted((d for d in root.glob(f"{k}-*") if (d / "summary.json").exists()), key=lambda d: d.name)
        for k in BENCH_KINDS
    }
    aa = runs["bench_aa"]
    pairs = [("bench_aa", aa[i], aa[(i + 1) % len(aa)]) for i in range(len(aa))] if len(aa) > 1 else []
    pairs += [("bench_decode5", aa[i % len(aa)], c) for i, c in enumerate(runs["bench_decode5"])] if aa else []
    out: list[str] = []
    rule = Rule("bench.prompts.code.tok_s", ">=", "relative", 0.97, "code rate")
    for kind in BENCH_KINDS:
        rows = []
        for k, base, cand in pairs:
            if k != kind:
                continue
            b, c = load_runs([base, cand])
            names = sorted(set(b.summary["prompts"]) & set(c.summary["prompts"]))
            strata = [(b.summary["prompts"][n]["runs"], c.summary["prompts"][n]["runs"]) for n in names]
            fam = comparison.holm([comparison.compare_samples(x, y, True) for x, y in strata], [True] * len(strata))
            strat = comparison.compare_stratified(strata, True)
            gate = exit_code(check([rule], {"bench": c}, {"bench": b}))
            rows.append({"marks": [f.mark for f in fam], "answer": strat.mark, "gate": gate})
        if not rows:
            continue
        n = len(rows)
        any_mark = sum(any(m in ("▲", "▼") for m in r["marks"]) for r in rows)
        worse = sum(r["answer"] == "▼" for r in rows)
        better = sum(r["answer"] == "▲" for r in rows)
        gates = {code: sum(r["gate"] == code for r in rows) for code in (0, 1, 3)}
        out.append(f"## {kind}: {n} bench pairs (5 runs a prompt)")
        out.append(f"  decode table: any prompt beyond noise in {any_mark}/{n} ({any_mark / n:.1%})")
        out.append(f"  answer line (stratified over prompts): slower {worse}/{n}, faster {better}/{n}")
        out.append(f"  gate 'code >= 0.97 x baseline': exit 0 {gates[0]}, exit 1 {gates[1]}, exit 3 {gates[3]}")
    return out


def burners(n: int) -> list[subprocess.Popen[bytes]]:
    """`n` busy loops, one process each."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def collect(out: Path, plan: list[tuple[str, int]], parallel: int, scale: str, long_tokens: int, burn: int) -> None:
    """Run `plan` ((kind, seed) pairs), `parallel` at a time: the quiet kinds shuffled together first (so A/A and A/B
    runs share the machine's state), then the `loaded` ones beside `burn` busy loops."""
    out.mkdir(parents=True, exist_ok=True)
    quiet = [j for j in plan if j[0] != "loaded"]
    random.Random(0).shuffle(quiet)
    loaded = [j for j in plan if j[0] == "loaded"]
    for phase, jobs in (("quiet", quiet), ("loaded", loaded)):
        if not jobs:
            continue
        hot = burners(burn) if phase == "loaded" else []
        t0 = time.perf_counter()
        try:
            with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
                futures = {}
                for i, (kind, seed) in enumerate(jobs):
                    if i < parallel:
                        time.sleep(0.3)  # staggered starts: dozens of interpreters importing at once
                    run = bench_run if kind in BENCH_KINDS else stress_run
                    args = (out, kind, seed, scale) if kind in BENCH_KINDS else (out, kind, seed, scale, long_tokens)
                    futures[pool.submit(run, *args)] = (kind, seed)
                for done, f in enumerate(as_completed(futures), 1):
                    try:
                        f.result()
                    except RuntimeError as e:
                        print(f"  failed {futures[f]}: {e}", flush=True)
                    if done % 10 == 0 or done == len(jobs):
                        print(f"  {phase}: {done}/{len(jobs)} in {time.perf_counter() - t0:.0f} s", flush=True)
        finally:
            for p in hot:
                p.kill()


def runs_of(root: Path) -> dict[str, list[Path]]:
    """The finished runs under `root` by kind, in seed order."""
    out: dict[str, list[Path]] = {k: [] for k in KINDS}
    for d in root.iterdir():
        if d.is_dir() and (d / "summary.json").exists() and (d / "cycles.jsonl").exists():
            kind, _, seed = d.name.rpartition("-")
            if kind in out and seed.isdigit():
                out[kind].append(d)
    for k in out:
        out[k].sort(key=lambda p: int(p.name.rpartition("-")[2]))
    return out


def pairs_of(runs: dict[str, list[Path]]) -> list[tuple[str, Path, Path]]:
    """(kind, baseline, candidate): `aa` runs paired with the next `aa` run (a ring, so every run is a baseline
    once and a candidate once); each other kind's run against the `aa` run at the same place in seed order."""
    aa = runs["aa"]
    out = [("aa", aa[i], aa[(i + 1) % len(aa)]) for i in range(len(aa))] if len(aa) > 1 else []
    for kind in ("loaded", "decode5", "insert30"):
        out += [(kind, aa[i % len(aa)], cand) for i, cand in enumerate(runs[kind])] if aa else []
    return out


def _lines(run: Path) -> list[dict[str, Any]]:
    from evalkit_stress.until_sure import counted_lines

    return counted_lines(run)[0]


def fixed_call(base: Path, cand: Path) -> dict[str, Any]:
    """The report's 18-cycle call on the pair: each stress figure's mark (Holm family at 5%), and the machine."""
    from evalkit.report.runs import LabelledRun
    from evalkit.report.tables import stress_marks
    from evalkit.runs.machine_probe import machine_changed
    from evalkit.runs.summaries import load_runs

    a, b = (LabelledRun(label, r) for label, r in zip(("base", "cand"), load_runs([base, cand])))
    metrics = list((a.summary.get("metrics") or {}).keys())
    marks = {m: v.mark for m, v in stress_marks(a, b, metrics).items()}
    distorted = [r.label for r in (a, b) if (r.summary.get("client") or {}).get("distorted")]
    moved = machine_changed(a.run.manifest, b.run.manifest)
    return {"marks": marks, "distorted": distorted, "machine": moved}


RULE_ONLY = os.environ.get("EVALKIT_CALIBRATION_RULE_ONLY") == "1"  # --rule-only, for the worker processes


def until_sure_replay(base: Path, cand: Path) -> dict[str, Any]:
    """`--until-sure --baseline base` replayed on the candidate's prefixes: the stop, the figure calls made at any
    look up to it, the calls and verdicts at the stop and after all 18 cycles."""
    from evalkit_stress.until_sure import SureRule, decide_run

    rule = SureRule(max_cycles=CYCLES)
    baseline = _lines(base)

    def calls(d: Any) -> dict[str, list[Any]]:
        """Each comparison's state (beyond up/down, within, can't tell, open) and ratio."""
        out: dict[str, list[Any]] = {}
        for c in d.checks:
            if c.what != "comparison":
                continue
            if c.decided and "beyond noise" in c.why:
                state = "beyond up" if (c.value or 1) > 1 else "beyond down"
            elif c.decided:
                state = "within"
            else:
                state = "can't tell" if "can't tell" in c.why else "open"
            out[c.name] = [state, c.value]
        return out

    def verdicts(d: Any) -> dict[str, Any]:
        return {c.name: c.value for c in d.checks if c.what == "verdict" and c.name in VERDICTS}

    stop, any_beyond_before_stop, at_stop = None, [], None
    for k in range(1, CYCLES + 1):
        d = decide_run(cand, rule, baseline, up_to=k, baseline_path=base, weigh_machine=not RULE_ONLY)
        got = calls(d)
        any_beyond_before_stop += [f"{n}@{k}" for n, (state, _) in got.items() if state.startswith("beyond")]
        if d.decided:
            stop, at_stop = k, d
            break
    full = decide_run(cand, rule, baseline, baseline_path=base, weigh_machine=not RULE_ONLY)
    return {
        "stop": stop,
        "beyond_at_any_look": any_beyond_before_stop,
        "calls_at_stop": calls(at_stop) if at_stop else None,
        "calls_full": calls(full),
        "verdicts_at_stop": verdicts(at_stop) if at_stop else None,
        "verdicts_full": verdicts(full),
    }


def read_pair(job: tuple[str, Path, Path]) -> dict[str, Any]:
    kind, base, cand = job
    return {
        "kind": kind,
        "base": base.name,
        "cand": cand.name,
        **fixed_call(base, cand),
        **until_sure_replay(base, cand),
    }


def score(rows: list[dict[str, Any]]) -> list[str]:
    """The figures a user sees, scored per pair kind."""
    out = []
    for kind in ("aa", "loaded", "decode5", "insert30"):
        rs = [r for r in rows if r["kind"] == kind]
        if not rs:
            continue
        n = len(rs)
        for r in rs:  # what the report shows: no mark at all where the machine differed or a client distorted
            r["shown"] = {} if (r["machine"] or r["distorted"]) and not RULE_ONLY else r["marks"]
        beyond = [r for r in rs if any(m in ("▲", "▼") for m in r["shown"].values())]
        machine = [r for r in rs if r["machine"] or r["distorted"]]
        look_false = [r for r in rs if r["beyond_at_any_look"]]
        stopped = [r for r in rs if r["stop"]]
        out.append(f"## {kind}: {n} pairs")
        out.append(
            f"  18-cycle report call: any figure beyond noise in {len(beyond)}/{n} ({len(beyond) / n:.1%}); "
            f"pairs whose machine differed or client distorted (no call made): {len(machine)}/{n}"
        )
        out.append(
            f"  --until-sure: any figure called beyond noise at any look up to the stop: {len(look_false)}/{n} "
            f"({len(look_false) / n:.1%}); stopped in {len(stopped)}/{n}, cycles median "
            f"{statistics.median([r['stop'] for r in stopped]) if stopped else '-'}"
        )
        if kind in PLANTED:
            metric, want = PLANTED[kind]
            hit = [r for r in rs if r["shown"].get(metric) == want]
            wrong = [r for r in rs if r["shown"].get(metric) in ("▲", "▼") and r["shown"].get(metric) != want]
            quiet = [r for r in rs if not (r["machine"] or r["distorted"])]
            hit_quiet = [r for r in quiet if r["shown"].get(metric) == want]
            out.append(
                f"  planted change in {metric}: called worse (18 cycles) in {len(hit)}/{n} ({len(hit) / n:.1%}); "
                f"on pairs with no machine flag {len(hit_quiet)}/{len(quiet)}; called the other way {len(wrong)}"
            )
        agree = total = 0
        margin = 0.10  # SureRule's default
        for r in stopped:
            for name, (at, _) in (r["calls_at_stop"] or {}).items():
                full, ratio = r["calls_full"].get(name, ["open", None])
                if at.startswith("beyond"):  # a call at the stop must be the 18-cycle call
                    ok = full == at
                elif at == "within":  # an equivalence must not be contradicted by a change past the margin
                    ok = not (full.startswith("beyond") and ratio is not None and abs(ratio - 1) > margin)
                else:  # no call at the stop: nothing to contradict
                    continue
                total += 1
                agree += ok
        ended_agree, ended_calls, ended_none = _ended_against_report(rs, margin)
        out.append(
            f"  --until-sure where it ended (its stop, else --max-cycles) against the report's 18-cycle marks: "
            f"{ended_agree}/{ended_calls} of its calls agree"
            + (f" ({ended_agree / ended_calls:.1%})" if ended_calls else "")
            + f"; {ended_none} figure(s) ended with no call (open, can't tell)"
        )
        same = [r for r in stopped if r["verdicts_at_stop"] == r["verdicts_full"]]
        if total:
            out.append(
                f"  figure calls at the stop agree with the 18-cycle ones: {agree}/{total} ({agree / total:.1%}) "
                "(a call beyond noise must be the 18-cycle call; 'within' must not meet a change past the margin)"
            )
        if stopped:
            out.append(f"  verdicts at the stop equal the 18-cycle ones: {len(same)}/{len(stopped)}")
    return out


def _ended_against_report(rows: list[dict[str, Any]], margin: float) -> tuple[int, int, int]:
    """(calls that agree, calls, figures with no call): `--until-sure`'s figure calls where it ended (its stop, else
    after --max-cycles) against what the report shows at 18 cycles. A call beyond noise agrees when the report marks
    the same direction (worse or better); a call "within ±margin" when the report marks no change past the margin."""
    from evalkit_stress import metric_registry

    agree = calls = none = 0
    for r in rows:
        ended = r["calls_at_stop"] or r["calls_full"]
        for name, (state, ratio) in ended.items():
            metric = name.split(" ")[0]
            shown = r["shown"].get(metric)
            if state.startswith("beyond"):
                up = state == "beyond up"
                worse = up != metric_registry.higher_is_better(metric)
                calls += 1
                agree += shown == ("▼" if worse else "▲")
            elif state == "within":
                calls += 1
                agree += not (shown in ("▲", "▼") and ratio is not None and abs(ratio - 1) > margin)
            else:
                none += 1
    return agree, calls, none


def cross_pair(job: tuple[Path, Path]) -> dict[str, Any]:
    return {"base": job[0].name, "cand": job[1].name, **fixed_call(*job)}


def cross(root: Path, pairs: int, workers: int) -> list[str]:
    """The report's 18-cycle call on `pairs` random pairs of distinct `aa` runs (seeded): the rule's own A/A rate at
    scale, with the machine check applied (as shown) and without it (the rank test and Holm alone)."""
    aa = runs_of(root)["aa"]
    rng = random.Random(1)
    jobs = [tuple(rng.sample(aa, 2)) for _ in range(pairs)]
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = list(pool.map(cross_pair, jobs, chunksize=8))
    raw = sum(any(m in ("▲", "▼") for m in r["marks"].values()) for r in rows)
    shown = sum(
        any(m in ("▲", "▼") for m in r["marks"].values()) and not (r["machine"] or r["distorted"]) for r in rows
    )
    per_metric: dict[str, int] = {}
    for r in rows:
        for m, v in r["marks"].items():
            per_metric[m] = per_metric.get(m, 0) + (v in ("▲", "▼"))
    worst = max(per_metric.items(), key=lambda kv: kv[1]) if per_metric else ("-", 0)
    return [
        f"## cross: {len(rows)} random pairs of {len(aa)} aa runs (18 cycles each), the report's call",
        f"  any figure beyond noise, rank test and Holm alone: {raw}/{len(rows)} ({raw / len(rows):.1%}); "
        f"as shown (no call where the machine differed or a client distorted): {shown}/{len(rows)}",
        f"  the figure called most often: {worst[0]} {worst[1]}/{len(rows)}",
    ]


def read(root: Path, workers: int) -> list[str]:
    jobs = pairs_of(runs_of(root))
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        for row in pool.map(read_pair, jobs, chunksize=2):
            rows.append(row)
    (root / "calibration-rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return score(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--collect", type=Path)
    p.add_argument("--read", type=Path)
    p.add_argument("--score", type=Path, help="score a calibration-rows.jsonl written by --read again (no runs needed)")
    p.add_argument("--cross", type=int, default=0, help="with --read: also this many random pairs of aa runs")
    p.add_argument(
        "--rule-only",
        action="store_true",
        help="with --read: the comparison rule alone (no machine check, no distorted-client hold), as if every pair "
        "had been measured on one machine state",
    )
    p.add_argument("--quick", action="store_true", help="a CI-sized run: 4 aa and 2 decode5 runs, collected and read")
    p.add_argument("--parallel", type=int, default=4)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--time-scale", default="20")
    p.add_argument("--long-tokens", type=int, default=20000)
    p.add_argument("--burners", type=int, default=os.cpu_count() or 1)
    p.add_argument("--first-seed", type=int, default=1)
    for kind in [*KINDS, *BENCH_KINDS]:
        p.add_argument(f"--{kind.replace('_', '-')}", type=int, default=0, help=f"{kind} runs to collect")
    a = p.parse_args()
    if a.rule_only:
        os.environ["EVALKIT_CALIBRATION_RULE_ONLY"] = "1"
        global RULE_ONLY
        RULE_ONLY = True
    t0 = time.perf_counter()
    if a.quick:
        with tempfile.TemporaryDirectory() as tmp:
            plan = [("aa", s) for s in range(1, 5)] + [("decode5", s) for s in range(5, 7)]
            collect(Path(tmp), plan, a.parallel, a.time_scale, a.long_tokens, 0)
            print("\n".join(read(Path(tmp), a.workers)))
    elif a.collect:
        seed = a.first_seed
        plan = []
        for kind in [*KINDS, *BENCH_KINDS]:
            plan += [(kind, s) for s in range(seed, seed + getattr(a, kind))]
            seed += getattr(a, kind)
        collect(a.collect, plan, a.parallel, a.time_scale, a.long_tokens, a.burners)
    elif a.score:
        rows = [json.loads(ln) for ln in a.score.read_text().splitlines() if ln.strip()]
        print("\n".join(score(rows)))
    elif a.read:
        print("\n".join(read(a.read, a.workers)))
        print("\n".join(bench_rows(a.read)))
        if a.cross:
            print("\n".join(cross(a.read, a.cross, a.workers)))
    else:
        p.error("give --collect DIR, --read DIR, --score ROWS or --quick")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
