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
        (["--chatty-tokens", "200"], False, "taken, effect not shown"),  # never stops early: can't be shown
    ],
    ids=["honoured", "ignored", "not-shown"],
)
def test_bench_length_forced_as_the_probe_saw_it(
    sim, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], forced: bool, words: str | None
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
    else:
        assert words in summary["length_why"] and "refused" not in summary["length_why"]
        assert "refuses or ignores" not in out and words in out
        # the probe's own request is the one place the sim saw the field go unheeded
        assert (support["ignore_eos"]["status"] == "ignored") == (words == "ignored")
