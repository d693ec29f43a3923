"""A second stress run with the same seed against a warm server (issue 40): fresh prompts by default (a salt from
the run, recorded), or, with --reuse-prompts, the verdicts say the long prompts came from the server's prefix cache
(its own counters) instead of "not exercised, use a longer prompt" or a bare "can't tell". Over HTTP against one
sim with a prefix cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from evalkit.sim.launch import start_sim

SCALE = "25"


def _stress(base_url: str, out: Path, name: str, *extra: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "evalkit", "stress", "--base-url", base_url, "--out", str(out), "--name", name]
    argv += ["--no-progress", "--cycles", "1", "--seed", "42", "--time-scale", SCALE, "--long-tokens", "16000"]
    argv += ["--gen-tokens", "48", "--metrics-interval", "0.05", *extra]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    run = out / name
    return {
        "summary": json.loads((run / "summary.json").read_text()),
        "manifest": json.loads((run / "manifest.json").read_text()),
        "stdout": p.stdout,
    }


def test_a_warm_server_gets_fresh_prompts_or_is_named(tmp_path: Path) -> None:
    flags = ["--no-yield", "--cancel-aborts", "--max-batch", "2", "--prefix-cache-blocks", "40000"]
    with start_sim([*flags, "--time-scale", SCALE, "--prefill-chunk", "512"]) as sim:
        first = _stress(sim.base_url, tmp_path, "first")
        again = _stress(sim.base_url, tmp_path, "again")
        reused = [_stress(sim.base_url, tmp_path, f"reuse{i}", "--reuse-prompts") for i in (1, 2)]
        events = sim.events()
    salts = [r["manifest"]["stress"]["prompt_salt"] for r in (first, again, *reused)]
    assert salts[0] and salts[1] and salts[0] != salts[1] and salts[2:] == ["", ""], salts
    cached = [e.get("cached_tokens") or 0 for e in events if e["prompt_tokens"] > 10000]
    print(f"\nsalts {salts}; long prompts' cached tokens {cached}")
    for r in (first, again):  # fresh prompts: the situations happened, and no cache is named
        d = r["summary"]["diagnoses"]
        for name in ("cancel_aborts", "head_of_line_blocking"):
            print(f"{r['manifest']['stress']['prompt_salt']} {name}: {d[name]['verdict']}: {d[name].get('why')}")
            assert d[name]["verdict"] != "not exercised", d[name]
        assert "prefix cache" not in json.dumps(d)
    # The second run of the unsalted prompts met them in the cache: its verdicts say so, with the server's counters.
    d = reused[1]["summary"]["diagnoses"]
    for name in ("cancel_aborts", "head_of_line_blocking"):
        v = d[name]
        print(f"reused {name}: {v['verdict']}: {v.get('why')}; {v.get('samples')}")
        assert v["verdict"] in ("not exercised", "can't tell"), v  # a cached reference prefill is no reference
        assert "came from the server's prefix cache" in v["why"] and "vllm:prefix_cache_hits_total" in v["why"], v
        assert "--reuse-prompts" in v["would_tell"], v
    assert "came from the server's prefix cache" in reused[1]["stdout"]
    rates = [r["summary"]["prefix_cache"]["hit_rate"] for r in (first, again, *reused)]
    assert rates[0] < 0.1 and rates[1] < 0.1 and rates[3] > 0.5, rates  # the summary's own figure of it
