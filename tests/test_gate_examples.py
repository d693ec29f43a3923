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
    for command in (
        "evalkit bench",
        "evalkit capability",
        "evalkit stress",
        "evalkit gate",
        "evalkit report",
        "--baseline",
        "--junit",
    ):
        assert command in runs, command
    uses = [s.get("uses", "") for s in job["steps"]]
    assert any(u.startswith("actions/upload-artifact") for u in uses)
    assert any("junit" in u for u in uses)
    always = [s["name"] for s in job["steps"] if s.get("if") == "always()"]
    assert any("Stop the server" in n for n in always) and any("Upload" in n for n in always)


def _evalkit_calls(text: str) -> list[list[str]]:
    """Each `evalkit CMD ...` invocation in a shell text, joined over backslash continuations, split into words."""
    import shlex

    joined = text.replace("\\\n", " ")
    calls = []
    for line in joined.splitlines():
        line = line.strip()
        if line.startswith("evalkit "):
            calls.append(shlex.split(line.split(" | ")[0].split(" > ")[0], comments=True))
    return calls


def test_gpu_smoke_runs_the_workflows_evalkit_steps_with_flags_the_cli_takes() -> None:
    """examples/gpu-smoke.sh proves the workflow on real hardware only if it runs the same commands and flags."""
    from evalkit.cli import build_parser

    wf = yaml.safe_load((EXAMPLES / "github-actions-gpu.yml").read_text())
    workflow = _evalkit_calls("\n".join(s.get("run", "") for s in wf["jobs"]["gate"]["steps"]))
    smoke = _evalkit_calls((EXAMPLES / "gpu-smoke.sh").read_text())
    assert {c[1] for c in workflow} <= {c[1] for c in smoke}, "a workflow step the smoke does not run"
    for cmd in workflow:
        flags = {w for w in cmd if w.startswith("--")}
        used = {w for c in smoke if c[1] == cmd[1] for w in c if w.startswith("--")}
        assert flags - {"--out", "--name", "--rules", "--baseline", "--junit", "--thinking"} <= used | {
            "--cycles",
            "--seed",
        }, cmd
    for cmd in workflow + smoke:
        # Shell variables stand for values: "1" parses as a count, a number and a path alike; a URL and a
        # KEY=VALUE stand in where the flag checks its value's form.
        stand_in = {"--base-url": "http://127.0.0.1:1/v1", "--build-info": "k=1"}
        words = [
            w if not w.startswith("$") and "${" not in w and "$(" not in w else stand_in.get(cmd[i - 1], "1")
            for i, w in enumerate(cmd[1:], 1)
        ]
        parser = build_parser(only=cmd[1])
        _args, unknown = parser.parse_known_args(words)
        assert not [u for u in unknown if u.startswith("--")], (cmd, unknown)
