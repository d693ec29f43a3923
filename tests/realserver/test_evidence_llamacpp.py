"""What a real llama-server says during a bench: its /metrics token counters match evalkit's counts, /props is
in the manifest, and its log is followed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit

pytestmark = pytest.mark.realserver


def test_metrics_deltas_equal_evalkit_counts_and_props_in_manifest(llama_server, tmp_path: Path) -> None:
    srv = llama_server(parallel=2, ctx=8192)
    # llama.cpp counts only prompt tokens it processed; a cached prefix would make its count smaller than the
    # prompt's, so the prompt cache is off for this comparison.
    (tmp_path / "evalkit.toml").write_text(
        f'[servers.llamacpp]\nbase_url = "{srv.base_url}"\nextra_body = {{ cache_prompt = false }}\n'
    )
    proc = run_evalkit(
        [
            "bench",
            "--server",
            "llamacpp",
            "--runs",
            "1",
            "--max-tokens",
            "32",
            "--out",
            str(tmp_path),
            "--name",
            "evidence",
            "--server-log",
            str(srv.log_path),
            "--build-info",
            "note=ci",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    run = run_dir_from(proc)
    summary = json.loads((run / "summary.json").read_text())
    manifest = json.loads((run / "manifest.json").read_text())
    lines = read_jsonl(run / "requests.jsonl")
    assert lines and all(x["status"] == "ok" for x in lines), [x.get("error") for x in lines]

    metrics = summary["server_metrics"]
    assert metrics["available"] and metrics["failed"] == 0, metrics["first_error"]
    counters = metrics["counters"]
    prompt, predicted = sum(x["prompt_tokens"] for x in lines), sum(x["completion_tokens"] for x in lines)
    print(
        f"\n[realserver] evidence: evalkit prompt/completion tokens {prompt}/{predicted}, llama.cpp counters "
        f"{counters.get('llamacpp:prompt_tokens_total')}/{counters.get('llamacpp:tokens_predicted_total')}"
    )
    assert counters["llamacpp:prompt_tokens_total"] == prompt
    assert counters["llamacpp:tokens_predicted_total"] == predicted
    code = metrics["per_label"]["code"]
    assert code["llamacpp:tokens_predicted_total"] == 32

    ident = manifest["server_identity"]
    assert ident["server_type"] == "llama.cpp"
    assert ident["props"]["total_slots"] == 2
    assert ident["props"]["n_ctx"] and ident["props"]["build_info"]
    assert manifest["build"]["note"] == "ci"
    assert summary["server_log"]["lines"] > 0  # llama-server logs every request it serves
