"""`evalkit report` on contract-shaped run directories: numbers equal the summaries', noise marks, plots."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from evalkit.cli import main
from evalkit.stats import mcnemar_exact_p
from runfixtures import bench_run, capability_run, stress_run

NUM = re.compile(r"^-?\d+(?:\.\d+)?")


def parse_tables(md: str) -> dict[str, dict[str, list[str]]]:
    """{table title: {row name: [cells]}} from every `### title` followed by a pipe table."""
    tables: dict[str, dict[str, list[str]]] = {}
    title = None
    for line in md.splitlines():
        if line.startswith("### "):
            title = line[4:].strip()
            tables[title] = {}
        elif title and line.startswith("|") and not line.startswith("| ---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            tables[title][cells[0]] = cells[1:]
    return tables


def table(tables: dict[str, dict[str, list[str]]], starts: str) -> dict[str, list[str]]:
    (key,) = [k for k in tables if k.startswith(starts)]
    return tables[key]


def num(cell: str) -> float:
    m = NUM.match(cell)
    assert m, cell
    return float(m.group())


def report(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "out" / "report.md"
    assert main(["report", *args, "-o", str(out)]) == 0
    return out.read_text()


def test_bench_tables_equal_summaries_and_mark_planted_change(tmp_path: Path) -> None:
    # 5 runs a side: the fewest at which the rank test can reach 5% with three prompts in one Holm family
    before = bench_run(tmp_path / "b1", "before", {"code": 100.3, "math": 118.6, "prose": 64.8}, 117.0, seed=1, n=5)
    # code +20% planted, math -20% planted, prose unchanged (an A/A row).
    after = bench_run(tmp_path / "b2", "after", {"code": 120.36, "math": 94.88, "prose": 64.8}, 186.0, seed=2, n=5)
    t = parse_tables(report(tmp_path, str(before), str(after)))
    decode = table(t, "Decode throughput")
    sb, sa = (json.loads((p / "summary.json").read_text()) for p in (before, after))
    for prompt in ("code", "math", "prose"):
        assert num(decode[prompt][0]) == pytest.approx(sb["prompts"][prompt]["tok_s"], abs=0.051)
        assert num(decode[prompt][1]) == pytest.approx(sa["prompts"][prompt]["tok_s"], abs=0.051)
    assert decode["code"][1].endswith("▲")
    assert decode["math"][1].endswith("▼")
    assert decode["prose"][1].endswith("≈")
    assert "(+20.0%)" in decode["code"][1] or "(+19." in decode["code"][1] or "(+20." in decode["code"][1]
    conc = table(t, "Concurrent streams")
    assert num(conc["combined tok/s"][1]) == pytest.approx(sa["concurrent"]["combined_tok_s"], abs=0.051)
    assert conc["combined tok/s"][1].endswith("▲")


def test_aa_pair_is_within_noise(tmp_path: Path) -> None:
    rates = {"code": 116.1, "math": 135.5, "prose": 74.2}
    a1 = bench_run(tmp_path / "a1", "A", rates, 186.0, jitter=0.01, seed=11, n=5)
    a2 = bench_run(tmp_path / "a2", "A again", rates, 186.0, jitter=0.01, seed=12, n=5)
    t = parse_tables(report(tmp_path, str(a1), str(a2)))
    decode = table(t, "Decode throughput")
    for prompt in rates:
        assert decode[prompt][1].endswith("≈"), decode[prompt]


def test_three_runs_a_side_cannot_be_called_however_far_apart(tmp_path: Path) -> None:
    # 3 against 3: the rank test's smallest p-value is 0.1, so a +20% change is "can't tell" per prompt, never a
    # mark the data cannot support.
    b1 = bench_run(tmp_path / "b1", "before", {"code": 100.0, "math": 100.0}, seed=1)
    b2 = bench_run(tmp_path / "b2", "after", {"code": 120.0, "math": 100.0}, seed=2)
    decode = table(parse_tables(report(tmp_path, str(b1), str(b2))), "Decode throughput")
    assert decode["code"][1].endswith("?") and decode["math"][1].endswith("?")


def test_labels_flag_and_build_label(tmp_path: Path) -> None:
    b1 = bench_run(tmp_path / "x1", "14f849af", {"code": 100.0})
    b2 = bench_run(tmp_path / "x2", "a2bf07fd", {"code": 85.0})
    md = report(tmp_path, str(b1), str(b2))
    assert "| prompt | 14f849af | a2bf07fd |" in md
    md = report(tmp_path, str(b1), str(b2), "--labels", "previous,upstream")
    assert "| prompt | previous | upstream |" in md
    assert main(["report", str(b1), str(b2), "--labels", "one", "-o", str(tmp_path / "r.md")]) == 2


def test_capability_table_and_mcnemar(tmp_path: Path) -> None:
    # before misses 12 musr questions; after gets all musr right and loses one gsm8k: 12 vs 1 discordant.
    before = capability_run(tmp_path / "c1", "before", {f"musr:{i}" for i in range(12)} | {"gsm8k:3"})
    after = capability_run(tmp_path / "c2", "after", {"gsm8k:3", "gsm8k:4"})
    t = parse_tables(report(tmp_path, str(before), str(after)))
    cap = table(t, "Capability, thinking off")
    sb, sa = (json.loads((p / "summary.json").read_text()) for p in (before, after))
    for ds in ("gsm8k", "math500", "musr", "humanevalplus"):
        assert cap[ds][0] == f"{sb['scores'][ds]['correct']}/{sb['scores'][ds]['total']}"
        assert cap[ds][1].startswith(f"{sa['scores'][ds]['correct']}/{sa['scores'][ds]['total']}")
    assert cap["total"][1].startswith(f"{sa['total']['correct']}/140 (+11)")
    assert cap["musr"][1].endswith("▲")  # 12 gained, 0 lost: p = 2/4096
    assert cap["gsm8k"][1].endswith("≈")  # 0 gained, 1 lost
    assert cap["total"][1].endswith("▲")


@pytest.mark.parametrize(
    "only_a,only_b,expected",
    [(0, 0, 1.0), (1, 0, 1.0), (0, 5, 0.0625), (0, 6, 0.03125), (3, 3, 1.0), (1, 12, 2 * 14 / 8192)],
)
def test_mcnemar_exact(only_a: int, only_b: int, expected: float) -> None:
    assert mcnemar_exact_p(only_a, only_b) == pytest.approx(expected)


def test_stress_table_and_plots(tmp_path: Path) -> None:
    # 6 cycles a side: figures are compared one value a cycle, and 6 against 6 can reach a Holm share of 5%
    before = stress_run(tmp_path / "s1", "before", 39.5, seed=1, cycles=6)
    after = stress_run(tmp_path / "s2", "after", 1.13, seed=2, cycles=6)
    md = report(tmp_path, str(before), str(after))
    t = parse_tables(md)
    lat = table(t, "Latency under a long prefill")
    sb, sa = (json.loads((p / "summary.json").read_text()) for p in (before, after))
    row = lat["short_insert_ttft_s p95"]
    assert num(row[0]) == pytest.approx(sb["metrics"]["short_insert_ttft_s"]["p95"], abs=0.0051)
    assert num(row[1]) == pytest.approx(sa["metrics"]["short_insert_ttft_s"]["p95"], abs=0.0051)
    assert row[1].endswith("▲")  # 39.5 s -> 1.13 s
    assert lat["long_prefill_s p95"] == ["40.00", "40.00 (+0.0%) ≈"]
    assert lat["errors"] == ["0", "0 (+0)"]
    out = tmp_path / "out"
    for name in ("report-stress-timeline.png", "report-ttft.png"):
        assert f"]({name})" in md
        img = mpimg.imread(out / name)
        assert img.shape[0] >= 300 and img.shape[1] >= 600, img.shape
        assert img.std() > 0.05  # not a blank canvas


def test_bisect_log_renders_commit_table(tmp_path: Path) -> None:
    log = tmp_path / "bisect.jsonl"
    steps = [
        ("90fc11e4", "removed switches", 102.2, "good", 5),
        ("d4b04876", "RMSNorm reduction", 84.7, "bad", 6),
        ("14f849af", "previous base", 100.2, "good", 1),
    ]
    log.write_text(
        "".join(
            json.dumps(
                {
                    "commit": c,
                    "note": n,
                    "metric": "code",
                    "tok_s": v,
                    "verdict": d,
                    "good_at_least": 96,
                    "bad_at_most": 89,
                    "commit_time": ct,
                }
            )
            + "\n"
            for c, n, v, d, ct in steps
        )
    )
    t = parse_tables(report(tmp_path, "--bisect-log", str(log)))
    bis = table(t, "Commits measured")
    assert list(bis) == ["commit", "14f849af", "90fc11e4", "d4b04876"]  # header, then by commit time
    assert bis["d4b04876"] == ["RMSNorm reduction", "84.7", "bad"]


def test_user_template(tmp_path: Path) -> None:
    b1 = bench_run(tmp_path / "x1", "one", {"code": 100.0}, jitter=0.0)
    tpl = tmp_path / "mine.md.j2"
    tpl.write_text(
        '{% import "tables.md.j2" as t %}MY REPORT {{ runs | length }}\n'
        '{{ t.table(tables["bench"]) }}code={{ summaries["one"]["prompts"]["code"]["tok_s"] }}\n'
    )
    md = report(tmp_path, str(b1), "--template", str(tpl))
    assert md.startswith("MY REPORT 1")
    assert "| code | 100.0 |" in md
    assert "code=100.0\n" in md


def test_bad_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nope"), "-o", str(tmp_path / "r.md")]) == 2
    assert "not a finished run directory" in capsys.readouterr().err
    assert main(["report", "--bisect-log", str(tmp_path / "none.jsonl"), "-o", str(tmp_path / "r.md")]) == 2


def test_report_on_real_bench_runs(sim, tmp_path: Path) -> None:
    """Bench runs measured against the sim: a planted +20% decode rate is beyond noise, a repeat (A/A) within it."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"name": "code", "prompt": "Write a long commented Python module."}) + "\n")
    runs = []
    for name, rate in (("a", "100"), ("b", "120")):
        s = sim("--decode-rate", rate, "--time-scale", "5")
        for rep in ("", "-again"):
            code = main(
                [
                    "bench",
                    "--base-url",
                    s.base_url,
                    "--out",
                    str(tmp_path),
                    "--name",
                    name + rep,
                    "--prompts",
                    str(prompts),
                    "--runs",
                    "5",  # the fewest a side at which the rank test can reach 5% (3 never can)
                    "--max-tokens",
                    "128",
                ]
            )
            assert code == 0
            runs.append(tmp_path / (name + rep))
        s.stop()
    a, a_again, b, _ = runs
    # the machine check has its own test (below); here the four runs' probes are made one, so a busy test machine
    # whose client got a different share of a core in one run does not turn this test's marks into ⚠
    probe = json.loads((a / "manifest.json").read_text()).get("machine")
    for r in runs:
        m = json.loads((r / "manifest.json").read_text())
        m["machine"] = m["machine_end"] = probe
        (r / "manifest.json").write_text(json.dumps(m))
    planted = table(parse_tables(report(tmp_path, str(a), str(b), "--labels", "A,B")), "Decode throughput")
    summary_b = json.loads((b / "summary.json").read_text())
    assert num(planted["code"][1]) == pytest.approx(summary_b["prompts"]["code"]["tok_s"], abs=0.051)
    assert planted["code"][1].endswith("▲"), planted
    aa = table(parse_tables(report(tmp_path, str(a), str(a_again), "--labels", "A,A2")), "Decode throughput")
    assert aa["code"][1].endswith("≈"), aa
    # The client's error budget is weighed against the decode window it can shorten: a budget that could inflate
    # B's rate by 19% of its shortest first→last window makes the +20% unjudgeable (⚠); one of 2% of it cannot
    # explain the change (▲ stays); the send→done request rate uses no first-token stamp and keeps its ▲ throughout.
    entry = summary_b["prompts"]["code"]
    window = min((t - 1) / r for t, r in zip(entry["completion_tokens"], entry["runs"]))
    for share, mark in ((0.19, "⚠"), (0.02, "▲")):
        summary_b["client"].update(error_budget_s=share * window, first_tokens_maybe_shared_stamp=1)
        (b / "summary.json").write_text(json.dumps(summary_b))
        tables = parse_tables(report(tmp_path / f"budget-{share}", str(a), str(b), "--labels", "A,B"))
        assert table(tables, "Decode throughput")["code"][1].endswith(mark), (share, tables)
        assert table(tables, "Request throughput")["code"][1].endswith("▲"), (share, tables)


def test_resumed_stress_run_samples_only_the_attempts_that_completed_cycles(tmp_path):
    from evalkit.report.runs import label_runs
    from evalkit.runs.rundir import RunDir
    from evalkit.runs.summaries import load_runs

    rd = RunDir.create(tmp_path, "resumed", "stress", {})
    base = 1000.0
    for cycle, attempt, ttft in [(1, 0, 0.5), (2, 0, 99.0), (2, 1, 0.6), (3, 1, 0.7)]:
        rd.append(
            "requests.jsonl",
            {
                "request_id": f"r{cycle}{attempt}",
                "cycle": cycle,
                "attempt": attempt,
                "scenario": "short_insert",
                "role": "short",
                "status": "ok",
                "t_sent": base,
                "t_first_token": base + ttft,
                "t_done": base + ttft,
                "ttft_s": ttft,
            },
        )
    rd.write_summary(
        {
            "kind": "stress",
            "seed": 1,
            "cycles": 3,
            "requests": 3,
            "errors": 0,
            "wrong_answers": 0,
            "cycle_attempts": {"1": 0, "2": 1, "3": 1},
            "metrics": {},
        }
    )
    [run] = label_runs(load_runs([rd.path]), ["x"])
    assert sorted(r.ttft_s or 0 for r in run.requests()) == [0.5, 0.6, 0.7]
    assert sorted(r["ttft_s"] for r in run.raw_requests()) == [0.5, 0.6, 0.7]  # the same lines, as written


def test_stress_table_says_when_runs_were_time_scaled(tmp_path):
    from evalkit.report.runs import label_runs
    from evalkit.report.tables import stress_table
    from evalkit.runs.rundir import RunDir
    from evalkit.runs.summaries import load_runs

    paths = []
    for name, scale in (("a", 1.0), ("b", 20.0)):
        rd = RunDir.create(tmp_path, name, "stress", {})
        rd.write_summary(
            {
                "kind": "stress",
                "seed": 1,
                "cycles": 1,
                "requests": 0,
                "errors": 0,
                "wrong_answers": 0,
                "options": {"time_scale": scale},
                "metrics": {"short_insert_ttft_s": {"p50": 1.0, "p95": 1.0, "max": 1.0, "n": 1}},
            }
        )
        paths.append(rd.path)
    table = stress_table(label_runs(load_runs(paths), ["a", "b"]))
    assert any("b: --time-scale 20" in n for n in table.notes)
    assert not any("a: --time-scale" in n for n in table.notes)


@pytest.mark.parametrize(
    "metric, higher",
    [
        ("short_insert_ttft_s", False),
        ("long_prefill_s", False),
        ("concurrent_combined_tok_s", True),
        ("effective_concurrency", True),
        ("concurrency_speedup", True),
    ],
)
def test_which_stress_metrics_are_better_higher(metric, higher):
    from evalkit_stress.metric_registry import higher_is_better

    assert higher_is_better(metric) is higher


def test_two_runs_of_one_build_label_are_told_apart_by_their_directories(tmp_path):
    """One build run at two flag sets (FastLLM --max_batch 1 and 2 on the H200) must not give two identical columns;
    a bench and a stress run of one build keep the plain label (they sit in different tables)."""

    mb1 = capability_run(tmp_path / "cap-mb1", "fastllm d3aea32f", set())
    mb2 = capability_run(tmp_path / "cap-mb2", "fastllm d3aea32f", {"gsm8k:1"})
    bench = bench_run(tmp_path / "bench-mb2", "fastllm d3aea32f", {"code": 100.0})
    out = tmp_path / "r.md"
    assert main(["report", str(mb1), str(mb2), str(bench), "-o", str(out)]) == 0
    md = out.read_text()
    assert "fastllm d3aea32f (cap-mb1) → fastllm d3aea32f (cap-mb2)" in md
    assert "fastllm d3aea32f (bench-mb2)" not in md


def test_runs_on_a_machine_that_changed_are_never_called_beyond_noise(tmp_path: Path) -> None:
    # a +20% change that 5 runs a side would call (see the planted-change test), measured with the client getting a
    # whole core in one run and 40% of one in the other: can't tell, with the probes' figures
    b1 = bench_run(tmp_path / "b1", "before", {"code": 100.0}, seed=1, n=5)
    b2 = bench_run(tmp_path / "b2", "after", {"code": 120.0}, seed=2, n=5)
    for run, share in ((b1, 0.99), (b2, 0.40)):
        m = json.loads((run / "manifest.json").read_text())
        m["machine"] = {"cpu_share": share, "rate": 27000.0, "loadavg_1m": 0.1, "cpus": 2}
        (run / "manifest.json").write_text(json.dumps(m))
    md = report(tmp_path, str(b1), str(b2))
    decode = table(parse_tables(md), "Decode throughput")
    assert decode["code"][1].endswith("⚠"), decode
    assert "can't tell: the measuring machine changed: the client got 0.99 of a core in one run and 0.40" in md
