"""Issue 57, items 3-4 of the report: one model rule across the whole report, and a GPU memory table whose columns
say which run (build, kind, run directory) each is and whose figures are compared only within one kind.

Two builds, each with a bench and a stress run (synthetic run files, `runfixtures`), both sampling GPU memory: the
stress runs peak near 20 GB, the bench runs near 9 GB, so a table that set a bench column against a stress column
would show a change of -11 GB that no build made.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.cli import main
from evalkit.report.model_rule import ModelNames, same_model, served_model
from runfixtures import bench_run, stress_run


def _identity(model_id: str, file: str | None, root: bool = False) -> dict[str, Any]:
    """A manifest's server identity: llama.cpp's /props model_path, or (root=True) vLLM's /v1/models root."""
    if root:
        return {"server_type": "vllm", "version": "0.11.0", "models": [{"id": model_id, "root": file}]}
    return {
        "server_type": "llama.cpp",
        "props": {"build_info": "b7000", "total_slots": 1, "n_ctx": 8192, "model_path": file},
        "models": [{"id": model_id, "meta": {"n_params": 8030261248, "size": 16060522496}}],
    }


def _set(run: Path, model_id: str, file: str | None, root: bool, peak: float) -> None:
    m = json.loads((run / "manifest.json").read_text())
    m["model"] = model_id
    m["server_identity"] = _identity(model_id, file, root)
    (run / "manifest.json").write_text(json.dumps(m))
    s = json.loads((run / "summary.json").read_text())
    s["gpu_memory"] = {"0": {"index": 0, "name": "NVIDIA H100 80GB HBM3", "peak_mib": peak}}
    (run / "summary.json").write_text(json.dumps(s))


def _report(tmp_path: Path, models: dict[str, tuple[str, str | None]], root: bool = False) -> tuple[str, list[Path]]:
    """before and after, a bench and a stress run each; `models[label]` = (the id the server reports, its file)."""
    runs = []
    for label, bench_peak, stress_peak, rate in (("before", 9000, 20000, 100.0), ("after", 9100, 20400, 104.0)):
        b = bench_run(tmp_path / f"{label}-bench", label, {"code": rate, "math": rate, "prose": rate})
        s = stress_run(tmp_path / f"{label}-stress", label, 1.0)
        _set(b, *models[label], root, bench_peak)
        _set(s, *models[label], root, stress_peak)
        runs += [b, s]
    out = tmp_path / "report.md"
    assert main(["report", *map(str, runs), "-o", str(out), "--no-html"]) == 0
    return out.read_text(), runs


def _table(md: str, heading: str) -> dict[str, list[str]]:
    """A markdown table's rows by their first cell, under the first line starting with `heading`."""
    lines = md[md.index(heading) :].splitlines()
    rows: dict[str, list[str]] = {}
    started = False
    for ln in lines[1:]:
        if ln.startswith("|"):
            started = True
            cells = [c.strip() for c in ln.strip().strip("|").split("|")]
            rows[cells[0]] = cells[1:]
        elif started:
            break
    return rows


def test_gpu_memory_columns_name_their_run_and_compare_only_within_a_kind(tmp_path: Path) -> None:
    md, _ = _report(tmp_path, {"before": ("m", None), "after": ("m", None)})
    section = md[md.index("## GPU memory") :]
    rows = _table(section, "## GPU memory")
    cols = rows["card"]
    assert cols == [
        "before · stress · before-stress",
        "after · stress · after-stress",
        "before · bench · before-bench",
        "after · bench · after-bench",
    ], cols
    peaks = rows["GPU 0 peak MiB"]
    print("\n" + "\n".join(f"{c}: {p}" for c, p in zip(cols, peaks)))
    # each kind's first run stands alone; the other is set against it, never against another kind's
    assert peaks[0] == "20000" and peaks[2] == "9000", peaks
    assert peaks[1].startswith("20400 (+400)") and peaks[3].startswith("9100 (+100)"), peaks
    assert "-10900" not in section and "-11000" not in section and "+11" not in section
    assert (
        "against the first run of the same kind only (stress: before · stress · before-stress; bench: before · "
        "bench · before-bench)" in section
    )


@pytest.mark.parametrize(
    "models,root,same",
    [
        # the case: one file (the random 8B), the id written otherwise by each build's server
        (
            {
                "before": ("/models/Random-8B.gguf", "/models/random-8b.gguf"),
                "after": ("random-8b", "/models/random-8b.gguf"),
            },
            False,
            True,
        ),
        # no file known: ids that differ only in case, a directory and .gguf are one model
        ({"before": ("/srv/Random-8B.gguf", None), "after": ("random-8b", None)}, False, True),
        # the reverse: one id (--served-model-name model) for two files
        ({"before": ("model", "/models/llama-3-8b"), "after": ("model", "/models/qwen3-8b")}, True, False),
    ],
    ids=["same-file-ids-differ", "ids-differ-cosmetically", "same-id-files-differ"],
)
def test_one_model_rule_across_the_report(
    tmp_path: Path, models: dict[str, tuple[str, str | None]], root: bool, same: bool
) -> None:
    md, runs = _report(tmp_path, models, root)
    manifests = [json.loads((r / "manifest.json").read_text()) for r in runs]
    names = ModelNames(manifests)
    assert same_model(served_model(manifests[0]), served_model(manifests[2])) is same
    assert len(names.distinct()) == (1 if same else 2), names.distinct()
    warned = "the runs served different models" in md
    same_line = next((ln for ln in md.splitlines() if ln.startswith("Same in all:")), "")
    differ = _table(md, "What differs between the builds:") if "What differs between the builds:" in md else {}
    ident = _table(md, "| what |")
    print(f"\nwarned {warned}; same line: {same_line!r}; differ: {differ}; identity model row: {ident.get('model')}")
    if same:
        assert not warned and "model" not in differ
        assert f"model {names.name(0)}" in same_line
        assert len(set(ident["model"])) == 1
    else:
        assert warned and "model" in differ and "model " not in same_line.split(":", 1)[1]
        assert differ["model"] == ["model (llama-3-8b)", "model (qwen3-8b)"]
        assert ident["model"] == ["model (llama-3-8b)", "model (qwen3-8b)"]
        assert "different models (model (llama-3-8b), model (qwen3-8b))" in md
