"""A run directory resumes only the same run (issue 39): started again with the same --name against another server
or with other options, a command exits 2 naming the field that differs; a finished run says so and exits with its
own code; --fresh starts over. Against two real sims over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.runs.rundir import read_jsonl
from runfixtures import bench_args

BENCH = ("--runs", "1", "--max-tokens", "64", "--concurrency", "2", "--warmup", "0")


def _bench(capsys: pytest.CaptureFixture[str], url: str, out: Path, name: str, *flags: str) -> tuple[int, str, str]:
    code = main(bench_args(url, out, name, *(flags or BENCH)))
    got = capsys.readouterr()
    return code, got.out, got.err


def _files(run: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(run.iterdir()) if f.name != ".evalkit.lock"}


def _run_ids(run: Path) -> set[str]:
    return {x["request_id"] for x in read_jsonl(run / "requests.jsonl") if x.get("bench_key")}


def _served(sim) -> set[str]:  # type: ignore[no-untyped-def]  # a SimProcess
    return {e["request_id"] for e in sim.events()}


def test_bench_against_another_server_with_the_same_name_exits_2_naming_it(
    sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = sim("--profile", "dual-2080ti-before", "--time-scale", "10")
    b = sim("--profile", "dual-2080ti-after", "--time-scale", "10")
    code, _, _ = _bench(capsys, a.base_url, tmp_path, "r")
    assert code == 0
    run = tmp_path / "r"
    before = _files(run)

    code, _, err = _bench(capsys, b.base_url, tmp_path, "r")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "server URL" in lines[0] and a.base_url in lines[0] and b.base_url in lines[0], lines[0]
    assert "--name" in lines[0] and "--fresh" in lines[0]
    assert _files(run) == before  # nothing written: no resume stamped, no figure of B appended
    assert not (_run_ids(run) & _served(b))

    # With its own name, B's figures: every measured request went to B.
    code, _, _ = _bench(capsys, b.base_url, tmp_path, "rb")
    assert code == 0
    assert _run_ids(tmp_path / "rb") <= _served(b) and not (_run_ids(tmp_path / "rb") & _served(a))
    sa = json.loads((run / "summary.json").read_text())
    sb = json.loads((tmp_path / "rb" / "summary.json").read_text())
    assert sa["concurrent"]["combined_tok_s"] != sb["concurrent"]["combined_tok_s"]

    # Other options on the same server: exit 2 naming the flag and both values.
    code, _, err = _bench(capsys, a.base_url, tmp_path, "r", "--runs", "1", "--max-tokens", "128", "--concurrency", "2")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--max-tokens was 64 and is now 128" in lines[0], err
    assert _files(run) == before


def test_a_finished_run_started_again_says_so_and_prints_its_own_table(
    sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = sim("--time-scale", "20")
    code, out, err = _bench(capsys, a.base_url, tmp_path, "r")
    assert code == 0
    run = tmp_path / "r"
    before, served = _files(run), _served(a)
    code2, out2, err2 = _bench(capsys, a.base_url, tmp_path, "r")
    assert code2 == code and out2 == out
    said, *table = err2.strip().splitlines()
    assert "is finished (exit 0)" in said and table == err.strip().splitlines()
    assert _files(run) == before
    assert {r for r in _served(a) - served if not r.startswith("preflight-")} == set()  # nothing measured again

    # --fresh starts over: the old lines are gone, new ones measured.
    code3, _, _ = _bench(capsys, a.base_url, tmp_path, "r", *BENCH, "--fresh")
    assert code3 == 0
    assert _run_ids(run) and not (_run_ids(run) & served)
    assert "resumes" not in json.loads((run / "manifest.json").read_text())


def test_capability_resume_with_other_options_is_refused_and_server_moved_resumes(
    sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = sim("--time-scale", "50", "--fail-rate", "0.3")  # (8 preflight tries all failing: 7e-5)
    b = sim("--time-scale", "50")
    cap = ["capability", "--thinking", "off", "--datasets", "gsm8k", "--out", str(tmp_path), "--name", "c"]
    code = main([*cap, "--limit", "24", "--base-url", a.base_url])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1, err
    left = json.loads((tmp_path / "c" / "summary.json").read_text())["total"]["outcomes"]["error"]
    assert left >= 1 and f"{left} of 24 questions failed" in err[-1], err[-1]
    assert main([*cap, "--limit", "24", "--max-tokens", "512", "--base-url", a.base_url]) == 2
    assert "--max-tokens was 4096 and is now 512" in capsys.readouterr().err
    assert main([*cap, "--limit", "24", "--base-url", b.base_url]) == 2
    assert "server URL" in capsys.readouterr().err
    # The same server restarted elsewhere (here: a clean one): --server-moved resumes, and only the failed are asked.
    assert main([*cap, "--limit", "24", "--base-url", b.base_url, "--server-moved"]) == 0
    capsys.readouterr()
    asked_b = [e for e in b.events() if not e["request_id"].startswith("preflight-")]
    assert len(asked_b) == left
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["total"]["total"] == 24 and summary["total"]["outcomes"]["error"] == 0
