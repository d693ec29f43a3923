"""Scenario files without a server: each validation rule gives exit 2 and one line naming the file, scenario and key;
a valid file's schedule follows its references, repeats, rounds and seeded ranges."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit_stress.scenario_file import load_scenarios, parse_scenarios
from evalkit_stress.schedule import build_schedule, render_schedule

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "scenarios"

GOOD = """
[[scenario]]
name = "s"
expect = ["short.ttft_s.p95 <= 2.0"]
  [[scenario.request]]
  id = "long"
  prompt = "long"
  tokens = 3000
  cancel = { offset = [1.0, 2.0] }
  [[scenario.request]]
  id = "short"
  prompt = "short"
  send = { after = "long", on = "done" }
"""

# (rule, file text, the key the one-line error must name)
MALFORMED = [
    ("unknown key", GOOD.replace('prompt = "short"', 'prompt = "short"\n  max_token = 5'), "request.short.max_token"),
    ("missing reference", GOOD.replace('after = "long"', 'after = "lng"'), "request.short.send.after"),
    (
        "reference cycle",
        GOOD.replace("  cancel = { offset = [1.0, 2.0] }", '  send = { after = "short", on = "sent" }'),
        "request.long.send.after",
    ),
    ("context too small", "context_tokens = 2048\n" + GOOD, "request.long.tokens"),
    ("metric it cannot produce", GOOD.replace("short.ttft_s.p95", "long.ttft_s.p95"), "expect"),
    ("unknown event", GOOD.replace('on = "done"', 'on = "first_byte"'), "request.short.send.on"),
    ("unknown prompt kind", GOOD.replace('prompt = "short"', 'prompt = "essay"'), "request.short.prompt"),
    ("reversed range", GOOD.replace("[1.0, 2.0]", "[2.0, 1.0]"), "request.long.cancel.offset"),
    ("expectation syntax", GOOD.replace("<= 2.0", "=< 2.0"), "expect"),
    ("duplicate id", GOOD.replace('id = "short"', 'id = "long"'), "request.long.id"),
    ("unknown metric", GOOD.replace("short.ttft_s.p95", "short.tpot_s.p95"), "expect"),
]


@pytest.mark.parametrize("rule,text,key", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_each_malformed_file_exits_2_with_one_line_naming_the_key(
    rule: str, text: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["stress", "--dry-run", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert str(path) in err[0] and "scenario 's'" in err[0] and f"key {key!r}" in err[0], err[0]
    assert "Traceback" not in err[0]


def test_the_good_file_is_valid_and_not_valid_toml_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parse_scenarios(GOOD, "good.toml")
    bad = tmp_path / "syntax.toml"
    bad.write_text("[[scenario]\nname = 's'\n")
    assert main(["stress", "--dry-run", "--scenario", str(bad)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_schedule_follows_repeats_rounds_references_and_seeded_ranges() -> None:
    f = parse_scenarios(
        """
cycles = 2
[[scenario]]
name = "s"
rounds = 3
  [[scenario.request]]
  id = "gen"
  prompt = "count"
  max_tokens = 64
  [[scenario.request]]
  id = "ins"
  prompt = "long"
  tokens = [2100, 4096]
  repeat = 2
  send = { after = "gen", on = "first_token", offset = [0.1, 0.5] }
  cancel = { after = "gen", on = "done", offset = 0.25 }
  [[scenario.request]]
  id = "mine"
  prompt = "text"
  text = "Name the capital of France."
  answer = "Paris"
  send = { after = "ins", on = "sent" }
""",
        "t.toml",
    )
    s = build_schedule(7, f.cycles or 1, 54000, scenarios=f)
    reqs = s.requests()
    assert len(reqs) == 2 * 3 * 4
    ins = [r for r in reqs if r.role == "ins"]
    assert {r.plan_id for r in ins if r.cycle == 1 and r.round_no == 2} == {"c1-s-r2-ins1", "c1-s-r2-ins2"}
    assert all(2100 <= (r.long_tokens or 0) <= 4096 and 0.1 <= r.offset_s <= 0.5 for r in ins)
    assert all(r.after == (f"c{r.cycle}-s-r{r.round_no}-gen",) and r.after_on == "first_token" for r in ins)
    assert all(r.cancel_refs == (f"c{r.cycle}-s-r{r.round_no}-gen",) and r.cancel_on == "done" for r in ins)
    mine = [r for r in reqs if r.role == "mine"]
    assert all(len(r.after) == 2 and r.expected == "Paris" for r in mine)
    assert len({r.offset_s for r in ins}) > 1  # drawn per round, not once
    text = render_schedule(s)
    assert "after gen.first_token +" in text and "cancel@gen.done+0.250s" in text and "round 3/3" in text
    assert text == render_schedule(build_schedule(7, 2, 54000, scenarios=f))
    assert text != render_schedule(build_schedule(8, 2, 54000, scenarios=f))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_example_is_valid_with_expectations(path: Path) -> None:
    f = load_scenarios(path)
    assert f.scenarios and all(s.expect for s in f.scenarios)


def test_resume_with_another_scenario_file_is_refused(tmp_path: Path) -> None:
    import json

    from evalkit.errors import UsageError
    from evalkit_stress.scenario_results import check_same_scenarios

    first = parse_scenarios(GOOD, "first.toml")
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(
        json.dumps({"kind": "stress", "stress": {"scenario_file": "first.toml", "scenario_sha256": first.sha256}})
    )
    check_same_scenarios(run, first)
    with pytest.raises(UsageError, match=r"first\.toml"):
        check_same_scenarios(run, parse_scenarios(GOOD.replace("2.0", "3.0"), "second.toml"))
