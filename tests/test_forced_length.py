"""The preflight's forced-length probe over HTTP against sims whose model stops early or talks on (issue 40).

A small model (SmolLM2-135M) answers a one-number question and talks on past 8 tokens with or without `ignore_eos`,
so the old 8-token probe could not tell; the probe now asks "Reply with just: OK" and forces two lengths past where
that reply stops. `--chatty-tokens N` makes the sim's answers run N tokens past the answer; `--ignore-fields` takes
`ignore_eos` / `min_tokens` and gives them no effect.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.runs.rundir import read_jsonl
from runfixtures import bench_args


@pytest.mark.parametrize(
    "flags,forced,words",
    [
        (["--chatty-tokens", "12"], True, None),  # talks past 8 tokens, stops by 64: honoured, seen
        (["--chatty-tokens", "12", "--ignore-fields", "ignore_eos,min_tokens"], False, "ignored"),
        # never stops early: the effect can't be shown, and ignore_eos is still sent (length_forced null)
        (["--chatty-tokens", "200"], None, "ignore_eos sent; its effect could not be observed with this model"),
    ],
    ids=["honoured", "ignored", "not-shown"],
)
def test_bench_length_forced_as_the_probe_saw_it(
    sim, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], forced: bool | None, words: str | None
) -> None:
    s = sim("--time-scale", "20", *flags)
    code = main([*bench_args(s.base_url, tmp_path, "b"), "--runs", "1", "--max-tokens", "24"])
    got = capsys.readouterr()
    out = got.out + got.err
    assert code == 0
    run = tmp_path / "b"
    summary = json.loads((run / "summary.json").read_text())
    support = json.loads((run / "manifest.json").read_text())["field_support"]["fields"]
    print(f"\n{flags}: ignore_eos {support['ignore_eos']}; length_why {summary.get('length_why')}")
    assert summary["length_forced"] is forced
    lines = [x for x in read_jsonl(run / "requests.jsonl") if x.get("bench_key")]
    assert lines and all(x["length_forced"] is forced for x in lines)
    if forced:
        assert support["ignore_eos"]["checked"] and "length_why" not in summary
        assert all(x["completion_tokens"] == 24 for x in lines)
    elif forced is None:
        assert summary["length_state"] == "sent_not_observable" and words in summary["length_why"]
        assert words in out and "no output length was forced" not in out and "refuses or ignores" not in out
        assert support["ignore_eos"]["status"] == "accepted" and not support["ignore_eos"]["checked"]
    else:
        assert words in summary["length_why"] and "refused" not in summary["length_why"]
        assert "refuses or ignores" not in out and words in out
        # the probe's own request is the one place the sim saw the field go unheeded
        assert (support["ignore_eos"]["status"] == "ignored") == (words == "ignored")


def test_bench_against_a_model_that_never_stops_says_the_effect_could_not_be_observed(
    sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 57: a random-weights model never stops early, so the probe cannot show ignore_eos working; bench sent it
    and every request ran to max_tokens. Neither the terminal nor the report may say "no output length was forced"
    or that the prompts "ran to max_tokens on their own"."""
    s = sim("--time-scale", "20", "--never-stop")
    code = main([*bench_args(s.base_url, tmp_path, "b"), "--runs", "1", "--max-tokens", "24"])
    out = "".join(capsys.readouterr())
    assert code == 0
    run = tmp_path / "b"
    summary = json.loads((run / "summary.json").read_text())
    support = json.loads((run / "manifest.json").read_text())["field_support"]["fields"]
    lines = [x for x in read_jsonl(run / "requests.jsonl") if x.get("bench_key")]
    print(f"\nignore_eos {support['ignore_eos']}\n{out}")
    assert support["ignore_eos"] == {
        "status": "accepted",
        "detail": "sent; its effect could not be observed with this model (without it the probe's reply ran to 64 "
        "tokens, length: the model does not stop early on its own)",
        "checked": False,
    }
    assert summary["length_state"] == "sent_not_observable" and summary["length_forced"] is None
    assert lines and all(x["length_forced"] is None and x["completion_tokens"] == 24 for x in lines)
    note = (
        "note: ignore_eos sent; its effect could not be observed with this model (without it the probe's reply ran "
        f"to 64 tokens, length: the model does not stop early on its own); every measured request ran to max_tokens "
        f"({len(lines)} of {len(lines)} at 24/24 tokens)"
    )
    assert note in out
    assert "no output length was forced" not in out and "not forced" not in out and "on their own" not in out

    assert main(["report", str(run), "-o", str(tmp_path / "report.md"), "--no-html"]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "ignore_eos sent; its effect could not be observed with this model" in report
    assert f"every measured request ran to max_tokens ({len(lines)} of {len(lines)} at 24/24 tokens)" in report
    assert "no output length was forced" not in report and "ran to max_tokens on their own" not in report


@pytest.mark.parametrize(
    "summary,says,never",
    [
        # a summary written before issue 57: the same state, in the older words, read as what it was
        (
            {
                "length_mode": "prompt",
                "length_forced": False,
                "length_why": "ignore_eos taken, effect not shown; min_tokens taken, effect not shown",
                "max_tokens": 512,
                "measured_requests": 15,
                "errors": 0,
                "stopped_early": [],
            },
            "ignore_eos sent; its effect could not be observed with this model; every measured request ran to "
            "max_tokens (15 of 15 at 512/512 tokens)",
            "no output length was forced",
        ),
        (
            {
                "length_state": "sent_not_observable",
                "length_mode": "prompt",
                "length_forced": None,
                "length_why": "ignore_eos sent; its effect could not be observed with this model (x)",
                "max_tokens": 512,
                "measured_requests": 15,
                "errors": 0,
                "stopped_early": [{"request_id": "r"}, {"request_id": "s"}],
            },
            "ignore_eos sent; its effect could not be observed with this model (x); 2 request(s) stopped before "
            "max_tokens (512) although it was sent",
            "every measured request",
        ),
        (
            {
                "length_state": "not_forced",
                "length_mode": "prompt",
                "length_forced": False,
                "length_why": "ignore_eos refused; min_tokens refused",
            },
            "no output length was forced (ignore_eos refused; min_tokens refused)",
            "ignore_eos sent",
        ),
        ({"length_state": "forced", "length_mode": "ignore_eos", "length_forced": True}, None, None),
    ],
    ids=["old-summary-not-shown", "sent-some-stopped-early", "not-forced", "forced"],
)
def test_length_note_keeps_the_three_states_apart(summary: dict[str, object], says: str | None, never: str) -> None:
    from evalkit.bench.length_note import length_note

    note = length_note(summary)
    if says is None:
        assert note is None
        return
    assert note is not None and says in note and never not in note, note


def test_check_says_the_length_could_not_be_observed_against_a_model_that_never_stops(sim, tmp_path: Path) -> None:
    """`evalkit check`'s row: can't tell (not "no"), in the same words, and no advice to fix a server that is fine."""
    s = sim("--time-scale", "20", "--never-stop")
    code = main(["check", "--base-url", s.base_url, "--out", str(tmp_path), "--name", "c"])
    rows = {r["name"]: r for r in json.loads((tmp_path / "c" / "check.json").read_text())["rows"]}
    row = rows["fixed output length"]
    print(f"\n{row}")
    assert code == 0 and row["supported"] is None and not row.get("fix")
    assert row["detail"].startswith("ignore_eos sent; its effect could not be observed with this model")
    assert "length_forced null" in row["detail"] and "length_forced false" not in row["detail"]
