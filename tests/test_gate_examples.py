"""The shipped CI examples stay usable: the gate rules parse, the workflow has every step the issue names."""

from __future__ import annotations

from pathlib import Path

import yaml

from evalkit.gate import load_rules

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_example_gate_rules_parse() -> None:
    rules = load_rules(EXAMPLES / "gate-rules.toml")
    kinds = {r.metric.split(".")[0] for r in rules}
    assert kinds == {"bench", "capability", "stress"}
    assert {r.limit_kind for r in rules} == {"value", "relative", "offset"}


def test_github_actions_workflow() -> None:
    wf = yaml.safe_load((EXAMPLES / "github-actions-gpu.yml").read_text())
    job = wf["jobs"]["gate"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    for command in ("evalkit bench", "evalkit capability", "evalkit stress", "evalkit gate", "evalkit report",
                    "--baseline", "--junit"):
        assert command in runs, command
    uses = [s.get("uses", "") for s in job["steps"]]
    assert any(u.startswith("actions/upload-artifact") for u in uses)
    assert any("junit" in u for u in uses)
    always = [s["name"] for s in job["steps"] if s.get("if") == "always()"]
    assert any("Stop the server" in n for n in always) and any("Upload" in n for n in always)
