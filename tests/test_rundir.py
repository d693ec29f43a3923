"""Run directories: manifest, append-only JSONL, torn-line recovery, resume."""

from __future__ import annotations

import json

import pytest

from evalkit.errors import UsageError
from evalkit.runs.run_identity import run_defines
from evalkit.runs.rundir import RunDir, RunFinished, iter_runs, read_jsonl


def test_create_writes_manifest_with_version_and_times(tmp_path):
    rd = RunDir.create(tmp_path, "r1", "bench", {"model": "m", "seed": 7})
    man = json.loads((tmp_path / "r1" / "manifest.json").read_text())
    assert man["kind"] == "bench" and man["model"] == "m" and man["seed"] == 7
    assert man["evalkit_version"] and man["started"] and man["finished"] is None
    assert not rd.resumed
    rd.finish(requests=3)
    man = rd.manifest
    assert man["finished"] and man["requests"] == 3


def test_append_is_line_per_record_and_readable(tmp_path):
    rd = RunDir.create(tmp_path, "r", "stress", {})
    for i in range(5):
        rd.append("requests.jsonl", {"request_id": f"x{i}", "status": "ok" if i % 2 == 0 else "error"})
    lines = (rd.path / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 5 and all(json.loads(ln)["request_id"] for ln in lines)
    assert rd.done_keys("requests.jsonl", "request_id") == {"x0", "x2", "x4"}
    assert rd.done_keys("requests.jsonl", "request_id", where=()) == {f"x{i}" for i in range(5)}


def test_reopen_resumes_and_cuts_a_torn_last_line(tmp_path):
    rd = RunDir.create(tmp_path, "r", "capability", {})
    rd.append("graded.jsonl", {"id": "gsm8k:1", "correct": True, "outcome": "correct", "extracted": "1"})
    with open(rd.path / "graded.jsonl", "a") as f:
        f.write('{"id": "gsm8k:2", "corr')  # what a SIGKILL mid-write leaves
    assert [r["id"] for r in read_jsonl(rd.path / "graded.jsonl")] == ["gsm8k:1"]
    again = RunDir.create(tmp_path, "r", "capability", {})
    assert again.resumed
    again.append("graded.jsonl", {"id": "gsm8k:2", "correct": False, "outcome": "wrong", "extracted": "3"})
    assert [r["id"] for r in again.read("graded.jsonl")] == ["gsm8k:1", "gsm8k:2"]
    assert len(again.manifest["resumes"]) == 1


def test_reopen_as_another_kind_is_a_usage_error(tmp_path):
    RunDir.create(tmp_path, "r", "bench", {})
    with pytest.raises(UsageError):
        RunDir.create(tmp_path, "r", "stress", {})


def test_iter_runs_needs_summary(tmp_path):
    rd = RunDir.create(tmp_path, "r", "bench", {})
    with pytest.raises(UsageError):
        list(iter_runs([rd.path]))
    rd.write_summary({"kind": "bench", "prompts": {}})
    [(path, man, summ)] = list(iter_runs([rd.path]))
    assert path == rd.path and man["kind"] == "bench"
    assert summ == {"schema_version": 1, "kind": "bench", "prompts": {}} and man["schema_version"] == 1


def test_a_short_write_is_cut_back_and_marks_the_run_incomplete(tmp_path, monkeypatch):
    import os

    from evalkit.runs import rundir as rundir_mod
    from evalkit.runs.rundir import RunWriteError

    rd = RunDir.create(tmp_path, "r", "bench", {})
    rd.append("requests.jsonl", {"request_id": "a", "t_sent": 1.0, "status": "ok"})
    real_write = os.write
    monkeypatch.setattr(rundir_mod.os, "write", lambda fd, data: real_write(fd, data[: len(data) // 2]))
    with pytest.raises(RunWriteError) as e:
        rd.append("requests.jsonl", {"request_id": "b", "t_sent": 2.0, "status": "ok"})
    monkeypatch.undo()
    assert e.value.exit_code == 1 and "requests.jsonl" in str(e.value) and "\n" not in str(e.value)
    assert (rd.path / "requests.jsonl").read_text().count("\n") == 1  # the half line is gone
    assert rd.manifest["incomplete"]["error"] == str(e.value) and rd.manifest["finished"] is None
    assert json.loads((rd.path / "summary.json").read_text())["incomplete"]
    with pytest.raises(RunWriteError):  # nothing more is written after a failure
        rd.append("requests.jsonl", {"request_id": "c", "t_sent": 3.0, "status": "ok"})
    again = RunDir.create(tmp_path, "r", "bench", {})  # a resume clears the mark
    assert "incomplete" not in again.manifest and again.resumed


def test_a_compacting_rewrite_is_atomic(tmp_path):
    rd = RunDir.create(tmp_path, "r", "capability", {})
    lines = [{"id": f"gsm8k:{i}", "correct": True, "outcome": "correct", "extracted": "1"} for i in range(3)]
    rd.rewrite("graded.jsonl", lines)
    assert rd.read("graded.jsonl") == lines and not list(rd.path.glob("*.tmp"))


def _defines(url: str, max_tokens: int, build: str | None = "b1") -> dict:
    ident = {"server_type": "llama.cpp", "props": {"build_info": build}, "models": [{"id": "m"}]}
    return run_defines(url, "m", ident, {"--max-tokens": max_tokens})


def test_reopen_resumes_only_the_same_run_and_a_complete_one_says_finished(tmp_path):
    rd = RunDir.create(tmp_path, "r", "bench", {}, defines=_defines("http://a:1/v1", 64))
    rd.append("lines.jsonl", {"request_id": "x", "status": "ok"})
    rd.finish(exit_code=1, complete=False)  # a request left failed: resumable
    for other, field in (
        (_defines("http://b:2/v1", 64), "server URL was http://a:1/v1 and is now http://b:2/v1"),
        (_defines("http://a:1/v1", 128), "--max-tokens was 64 and is now 128"),
        (_defines("http://a:1/v1", 64, "b2"), "the server's build_info was b1 and is now b2"),
    ):
        with pytest.raises(UsageError, match="--fresh") as e:
            RunDir.create(tmp_path, "r", "bench", {}, defines=other)
        assert field in str(e.value)
    assert "resumes" not in rd.manifest  # a refused resume writes nothing
    # An identity endpoint that did not answer this time is not another server; a moved server keeps its run.
    again = RunDir.create(tmp_path, "r", "bench", {}, defines=_defines("http://b:2/v1", 64, None), server_moved=True)
    assert again.resumed and again.manifest["finished"] is None and "exit_code" not in again.manifest
    again.finish(exit_code=0, complete=True)
    with pytest.raises(RunFinished) as done:
        RunDir.create(tmp_path, "r", "bench", {}, defines=_defines("http://b:2/v1", 64))
    assert done.value.exit_code == 0 and done.value.path == tmp_path / "r"
    fresh = RunDir.create(tmp_path, "r", "bench", {}, defines=_defines("http://c:3/v1", 32), fresh=True)
    assert not fresh.resumed and fresh.read("lines.jsonl") == []
    assert fresh.manifest["defines"]["--max-tokens"] == 32
