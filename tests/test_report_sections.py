"""The report's sections are registered per kind (evalkit/report/sections.py): each kind present gets its section,
in the registry's order whatever the order of the runs, and a kind with no entry gets none."""

from __future__ import annotations

from pathlib import Path

from evalkit.report.runs import label_runs
from evalkit.report.sections import SECTIONS, sections
from evalkit.runs.summaries import load_runs
from runfixtures import bench_run, capability_run, stress_run, write_run


def test_each_kind_present_gets_its_section_in_registry_order(tmp_path: Path) -> None:
    paths = [
        stress_run(tmp_path / "s", "s", insert_ttft=1.0),
        capability_run(tmp_path / "c", "c", wrong={"gsm8k:1"}),
        bench_run(tmp_path / "b", "b", {"code": 100.0}),
        write_run(tmp_path / "k", "check", {}, "k"),
    ]
    runs = label_runs(load_runs(paths), ["s", "c", "b", "k"])
    by_kind: dict = {}
    for r in runs:
        by_kind.setdefault(r.kind, []).append(r)
    built = sections(by_kind, 0.02)
    assert [s["kind"] for s in built] == ["bench", "capability", "stress"]
    assert [s["heading"] for s in built] == [s.heading for s in SECTIONS if s.kind != "load"]
    # Each holds its kind's tables: bench's rates, capability's scores, stress's latency table first.
    assert built[0]["tables"][0].key.startswith("bench")
    assert built[2]["tables"][0].key == "stress"
    assert any("gsm8k" in name for t in built[1]["tables"] for name, _ in t.rows)
