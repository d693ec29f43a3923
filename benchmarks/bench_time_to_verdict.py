"""Time to a verdict: `--until-sure` against a fixed 18 cycles (stress) and against a fixed run count (bench).

Stress: for each seed, the sim's dual-2080ti "before" and "after" builds run 18 cycles each (time-scaled, the sim's
log followed). An `--until-sure` run is a prefix of the 18-cycle one (same seed, same schedule; tested in
tests/test_stress_until_sure_live.py), so its stop is read off the 18-cycle run: the first cycle whose files decide
every check (stress/until_sure.decide_run on that prefix). Printed per build: the cycles and wall time to the
decision against 18, and whether the verdicts at the stop equal the 18-cycle ones; "both orders": the after build
against the before build as baseline, and the before build against the after build; and the after build alone, whose
short-insert p95 moves with where the insert lands in a prefill chunk. The noisy profile (`--only noisy`) is the after
build with `--decode-jitter` (each request's decode rate drawn around the profile's): its combined tok/s wanders
from cycle to cycle, so it must go to 18 undecided, naming the figure.

Bench: `bench --until-sure` on a steady sim (stops at the minimum) and on a jittery one (`--decode-jitter`), seeded
repetitions: the runs it took, and how often each prompt's interval held the sim's true median rate.

    python benchmarks/bench_time_to_verdict.py [--seeds 5] [--time-scale 20] [--bench-reps 20] [--only stress|bench]

The 100 seeded repetitions of the stress pair run apart from their reading (a many-core machine runs the pairs, this
one reads them with the rule of the day):

    python benchmarks/bench_time_to_verdict.py --collect RUNS --seeds 100 --parallel 40 --time-scale 20
    python benchmarks/bench_time_to_verdict.py --runs-from RUNS
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from evalkit.sim.launch import start_sim
from evalkit_stress.until_sure import SureRule, counted_lines, decide_run

REPO = Path(__file__).resolve().parent.parent
CYCLES = 18
VERDICTS = ("head_of_line_blocking", "cancel_aborts", "effective_concurrency", "long_hurt_by_inserts")


def stress_run(out: Path, profile: str, seed: int, scale: str, long_tokens: int, jitter: float = 0.0) -> Path:
    """An 18-cycle stress run of `profile` with the sim's log; its run directory."""
    log = out / f"{profile}-{seed}.log"
    noise = ["--decode-jitter", str(jitter), "--seed", str(seed)] if jitter else []
    with start_sim(["--profile", profile, "--time-scale", scale, "--server-log-file", str(log), *noise]) as sim:
        p = subprocess.run(
            [sys.executable, "-m", "evalkit", "stress", "--base-url", sim.base_url, "--out", str(out)]
            + ["--name", f"{profile}-{seed}", "--no-progress", "--cycles", str(CYCLES), "--seed", str(seed)]
            + ["--time-scale", scale, "--long-tokens", str(long_tokens), "--server-log", str(log)],
            capture_output=True,
            text=True,
        )
    if p.returncode != 0:
        raise SystemExit(f"stress {profile} seed {seed} exit {p.returncode}: {p.stderr[-500:]}")
    return Path(p.stdout.strip().splitlines()[-1])


def verdicts_of(decision: Any) -> dict[str, Any]:
    return {c.name: c.value for c in decision.checks if c.what == "verdict" and c.name in VERDICTS}


def time_to_verdict(run: Path, rule: SureRule, baseline: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The first prefix that decides, its verdicts against the full run's, and the wall time to it."""
    cycles = {c["cycle"]: c for c in map(json.loads, (run / "cycles.jsonl").read_text().splitlines())}
    full = decide_run(run, rule, baseline)
    stop, at = None, None
    for k in range(1, CYCLES + 1):
        d = decide_run(run, rule, baseline, up_to=k)
        if d.decided:
            stop, at = k, d
            break
    t0 = cycles[1]["t_start"]
    return {
        "stop": stop,
        "wall_to_stop_s": cycles[stop]["t_end"] - t0 if stop else None,
        "wall_full_s": cycles[CYCLES]["t_end"] - t0,
        "same_verdicts": at is not None and verdicts_of(at) == verdicts_of(full),
        "verdicts_at_stop": verdicts_of(at) if at else None,
        "verdicts_full": verdicts_of(full),
        "undecided_full": [c.name for c in full.undecided()],
    }


def stress_pairs(
    out: Path, seeds: list[int], scale: str, long_tokens: int, parallel: int
) -> dict[int, tuple[Path, Path]]:
    """The before and after builds' 18-cycle runs of each seed, `parallel` runs at a time; kept under `out`."""
    jobs = [(seed, profile) for seed in seeds for profile in ("dual-2080ti-before", "dual-2080ti-after")]
    got: dict[tuple[int, str], Path] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {}
        for i, (seed, profile) in enumerate(jobs):
            if i < parallel:
                time.sleep(0.5)  # staggered starts: dozens of interpreters importing at once miss the sim's timeout
            futures[pool.submit(stress_run, out, profile, seed, scale, long_tokens)] = (seed, profile)
        for f in as_completed(futures):
            got[futures[f]] = f.result()
            print(f"  ran {futures[f][1]} seed {futures[f][0]} ({len(got)} of {len(jobs)})", flush=True)
    return {seed: (got[(seed, "dual-2080ti-before")], got[(seed, "dual-2080ti-after")]) for seed in seeds}


def saved_pairs(runs: Path) -> dict[int, tuple[Path, Path]]:
    """The pairs a `--collect` run left under `runs` (directories named PROFILE-SEED), by seed."""
    pairs: dict[int, tuple[Path, Path]] = {}
    for before in sorted(p for p in runs.glob("dual-2080ti-before-*") if p.is_dir()):
        seed = int(before.name.rsplit("-", 1)[1])
        after = runs / f"dual-2080ti-after-{seed}"
        if (before / "cycles.jsonl").exists() and (after / "cycles.jsonl").exists():
            pairs[seed] = (before, after)
    return dict(sorted(pairs.items()))


def report_stress(pairs: dict[int, tuple[Path, Path]], scale: str, long_tokens: int) -> None:
    rule = SureRule(max_cycles=CYCLES)
    rows: dict[str, list[dict[str, Any]]] = {}
    for seed, (before, after) in pairs.items():
        base_b, base_a = counted_lines(before)[0], counted_lines(after)[0]
        cases = {
            "before alone": time_to_verdict(before, rule, None),
            "after vs before": time_to_verdict(after, rule, base_b),
            "before vs after": time_to_verdict(before, rule, base_a),
            "after alone": time_to_verdict(after, rule, None),
        }
        for name, r in cases.items():
            rows.setdefault(name, []).append(r)
            print(
                f"seed {seed} {name:<20} stop {r['stop'] or 'none':>4} of {CYCLES}  "
                f"wall {r['wall_to_stop_s'] or float('nan'):6.1f} s of {r['wall_full_s']:6.1f} s  "
                f"same verdicts {r['same_verdicts']}  undecided at 18: {r['undecided_full'] or '-'}",
                flush=True,
            )
            if r["stop"] and not r["same_verdicts"]:
                print(f"    differed: at the stop {r['verdicts_at_stop']}; at 18 {r['verdicts_full']}", flush=True)
    print(f"\nstress, time scale {scale}, {long_tokens}-token long prompt, {len(pairs)} seed(s):")
    for name, rs in rows.items():
        stops = [r["stop"] for r in rs if r["stop"]]
        same = sum(r["same_verdicts"] for r in rs)
        never = len(rs) - len(stops)
        walls = [r["wall_to_stop_s"] / r["wall_full_s"] for r in rs if r["stop"]]
        print(
            f"  {name:<20} decided in {len(stops)}/{len(rs)}; cycles to decide median "
            f"{statistics.median(stops) if stops else '-'} max {max(stops) if stops else '-'} of {CYCLES}; "
            f"wall share median {statistics.median(walls) if walls else float('nan'):.2f}; "
            f"verdicts equal the 18-cycle ones {same}/{len(rs)}; undecided at 18: {never}"
        )


def bench_stress(seeds: int, scale: str, long_tokens: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        report_stress(stress_pairs(Path(tmp), list(range(1, seeds + 1)), scale, long_tokens, 1), scale, long_tokens)


def bench_noisy(seeds: int, scale: str, long_tokens: int, jitter: float) -> None:
    rule = SureRule(max_cycles=CYCLES)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(1, seeds + 1):
            run = stress_run(Path(tmp), "dual-2080ti-after", seed, scale, long_tokens, jitter)
            r = time_to_verdict(run, rule, None)
            full = decide_run(run, rule)
            why = {c.name: c.why for c in full.undecided()}
            print(
                f"noisy (after, --decode-jitter {jitter}) seed {seed}: stop {r['stop'] or 'none'} of {CYCLES}; "
                f"undecided at 18: {why or '-'}",
                flush=True,
            )


def bench_bench(reps: int, jitter: float) -> None:
    truth = 200.0  # the sim's --decode-rate: the median of the per-request rates it draws
    with tempfile.TemporaryDirectory() as tmp:
        for label, flags in (("steady", []), (f"jitter {jitter}", ["--decode-jitter", str(jitter)])):
            held = total = 0
            runs: list[int] = []
            decided = 0
            for rep in range(1, (reps if flags else 3) + 1):
                with start_sim(["--decode-rate", str(truth), "--seed", str(rep), *flags]) as sim:
                    p = subprocess.run(
                        [sys.executable, "-m", "evalkit", "bench", "--base-url", sim.base_url, "--out", tmp]
                        + ["--name", f"{label}-{rep}", "--max-tokens", "64", "--concurrency", "1", "--until-sure"],
                        capture_output=True,
                        text=True,
                    )
                s = json.loads((Path(p.stdout.strip().splitlines()[-1]) / "summary.json").read_text())
                decided += s["until_sure"]["decided"]
                for pr in s["prompts"].values():
                    lo, hi = pr["until_sure"]["interval"]
                    held += lo <= truth <= hi
                    total += 1
                    runs.append(len(pr["runs"]))
            print(
                f"bench --until-sure, {label}: {decided} of {total // 3} runs decided; runs per prompt median "
                f"{statistics.median(runs)} (min {min(runs)}, max {max(runs)}); interval held the true "
                f"{truth:g} tok/s in {held}/{total} prompts",
                flush=True,
            )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--time-scale", default="20")
    p.add_argument("--long-tokens", type=int, default=54000)
    p.add_argument("--bench-reps", type=int, default=20)
    p.add_argument("--jitter", type=float, default=0.03)
    p.add_argument("--noisy-jitter", type=float, default=0.5)
    p.add_argument("--only", choices=("stress", "noisy", "bench"))
    p.add_argument("--collect", type=Path, help="only run the stress pairs (seeds --first-seed on) and keep them here")
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--parallel", type=int, default=1, help="stress runs at a time with --collect")
    p.add_argument("--runs-from", type=Path, help="report the stress pairs a --collect run kept here")
    a = p.parse_args()
    if a.collect:
        seeds = list(range(a.first_seed, a.first_seed + a.seeds))
        t0 = time.perf_counter()
        stress_pairs(a.collect, seeds, a.time_scale, a.long_tokens, a.parallel)
        print(f"collected {len(seeds)} seed(s) in {time.perf_counter() - t0:.0f} s")
        return 0
    if a.runs_from:
        report_stress(saved_pairs(a.runs_from), a.time_scale, a.long_tokens)
        return 0
    os.environ.setdefault("EVALKIT_DATA_DIR", str(REPO.parent / "shared" / "datasets"))
    t0 = time.perf_counter()
    if a.only in (None, "stress"):
        bench_stress(a.seeds, a.time_scale, a.long_tokens)
    if a.only in (None, "noisy"):
        bench_noisy(a.seeds, a.time_scale, a.long_tokens, a.noisy_jitter)
    if a.only in (None, "bench"):
        bench_bench(a.bench_reps, a.jitter)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
