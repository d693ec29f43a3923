"""Schemas: docs/schemas/ is what the models generate, and the TOML and JSON readers never raise anything but a
one-line UsageError (a hypothesis fuzz of 10,000 examples in all, calling the readers directly)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalkit.commands.publish_schemas import json_schemas
from evalkit.config.profiles import load_profiles
from evalkit.errors import UsageError
from evalkit.gate import load_rules
from evalkit.runs.rundir import iter_runs, read_json_object, read_jsonl
from evalkit_evals.runner import read_replay
from evalkit_stress.scenario_file import parse_scenarios

DOCS = Path(__file__).resolve().parent.parent / "docs" / "schemas"
FUZZ = settings(
    max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None
)


def test_published_json_schemas_are_current() -> None:
    want = json_schemas()
    have = {p.name: p.read_text(encoding="utf-8") for p in DOCS.glob("*.schema.json")}
    assert have == want, (
        f"docs/schemas is stale: run `{sys.executable} -m evalkit.commands.publish_schemas docs/schemas`"
    )


# --- TOML: text built from the keys the files use, values of every TOML type, and raw noise ----------------------
KEYS = [
    "base_url",
    "model",
    "api_key_env",
    "api_key",
    "thinking",
    "concurrency",
    "extra_body",
    "build",
    "label",
    "log_patterns",
    "metric",
    "op",
    "value",
    "relative",
    "offset",
    "name",
    "cycles",
    "run",
    "context_tokens",
    "id",
    "prompt",
    "tokens",
    "max_tokens",
    "send",
    "cancel",
    "repeat",
    "after",
    "on",
    "rounds",
    "expect",
    "report",
    "text",
    "answer",
    "same_as",
    "role",
    "description",
    "servers",
    "rule",
    "scenario",
]
SCALARS = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "+nan",
            "0",
            "-0.0",
            "1e308",
            "true",
            "false",
            "''",
            '"<="',
            "'long'",
            "'short'",
            "'count'",
            "'http://h:1/v1'",
            "1979-05-27",
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=False).map(repr).filter(lambda s: "e" not in s or "." in s),
    st.text(max_size=12).map(json.dumps),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=3).map(
            lambda d: "{" + ", ".join(f"{k} = {v}" for k, v in d.items()) + "}"
        ),
    ),
    max_leaves=6,
)
HEADERS = st.sampled_from(
    [
        "",
        "[servers.x]",
        "[servers.x.build]",
        "[servers]",
        "[[rule]]",
        "[[scenario]]",
        "[[scenario.request]]",
        '[servers."a b"]',
        "[[servers]]",
    ]
)
LINES = st.one_of(
    st.tuples(st.sampled_from(KEYS), VALUES).map(lambda kv: f"{kv[0]} = {kv[1]}"), HEADERS, st.text(max_size=20)
)
TOML = st.one_of(st.lists(LINES, max_size=12).map("\n".join), st.binary(max_size=64).map(lambda b: b.decode("latin-1")))


def _quiet(call) -> None:  # type: ignore[no-untyped-def]  # any callable
    try:
        call()
    except UsageError as e:
        assert "\n" not in str(e), str(e)


@FUZZ
@given(TOML)
def test_fuzz_profiles(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    p = tmp_path_factory.getbasetemp() / "fuzz-evalkit.toml"
    p.write_bytes(text.encode("utf-8", "surrogatepass"))
    _quiet(lambda: load_profiles(p))


@FUZZ
@given(TOML)
def test_fuzz_gate_rules(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    p = tmp_path_factory.getbasetemp() / "fuzz-rules.toml"
    p.write_bytes(text.encode("utf-8", "surrogatepass"))
    _quiet(lambda: load_rules(p))


@FUZZ
@given(TOML)
def test_fuzz_scenario_files(text: str) -> None:
    _quiet(lambda: parse_scenarios(text, "fuzz.toml"))


# --- JSON: run files and replay files -------------------------------------------------------------------------
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(["bench", "stress", "capability", "ok", "error", "correct", "gsm8k:1"]),
)
JSON_KEYS = st.sampled_from(
    [
        "kind",
        "schema_version",
        "evalkit_version",
        "started",
        "finished",
        "command",
        "prompts",
        "runs",
        "tok_s",
        "scores",
        "total",
        "correct",
        "seed",
        "cycles",
        "requests",
        "errors",
        "wrong_answers",
        "metrics",
        "id",
        "content",
        "reasoning",
        "request_id",
        "t_sent",
        "status",
        "outcome",
        "incomplete",
        "gsm8k",
        "code",
    ]
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(JSON_KEYS, inner, max_size=6)),
    max_leaves=12,
)
JSON_TEXT = st.one_of(JSON.map(lambda v: json.dumps(v)), st.binary(max_size=40).map(lambda b: b.decode("latin-1")))
LINES_TEXT = st.lists(JSON_TEXT, max_size=5).map(lambda xs: "\n".join(xs) + "\n")


@FUZZ
@given(JSON_TEXT, JSON_TEXT)
def test_fuzz_run_directories(tmp_path_factory: pytest.TempPathFactory, manifest: str, summary: str) -> None:
    run = tmp_path_factory.getbasetemp() / "fuzz-run"
    run.mkdir(exist_ok=True)
    (run / "manifest.json").write_bytes(manifest.encode("utf-8", "surrogatepass"))
    (run / "summary.json").write_bytes(summary.encode("utf-8", "surrogatepass"))
    _quiet(lambda: list(iter_runs([run])))
    _quiet(lambda: read_json_object(run / "summary.json"))


@FUZZ
@given(LINES_TEXT, st.booleans())
def test_fuzz_jsonl_and_replay(tmp_path_factory: pytest.TempPathFactory, text: str, raw: bool) -> None:
    p = tmp_path_factory.getbasetemp() / "fuzz.jsonl"
    p.write_bytes(text.encode("utf-8", "surrogatepass") if not raw else text.encode("latin-1", "replace"))
    _quiet(lambda: read_jsonl(p))
    _quiet(lambda: read_replay(p))


def test_the_fuzz_runs_ten_thousand_examples() -> None:
    fuzzers = [f for name, f in globals().items() if name.startswith("test_fuzz_")]
    assert len(fuzzers) * FUZZ.max_examples >= 10_000
    assert math.isfinite(FUZZ.max_examples)
