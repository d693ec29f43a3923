"""A server that echoes the API key everywhere (400/401/500 bodies, SSE error events, answers, /props, /v1/models,
its own log read with --server-log): bench, stress, capability, load and check run against it over real HTTP, and
the key appears nowhere: not on stdout or stderr, not in any file of a run directory, not in the report or the
JUnit file. Run files are owner-only. Unit rows for `scrub` and the HTTP error line."""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.client.http_errors import describe
from evalkit.redact import REDACTED, scrub

HERE = Path(__file__).resolve().parent
EVALKIT = [sys.executable, "-m", "evalkit"]
KEY = "sk-hostile-" + secrets.token_hex(12)


@pytest.mark.parametrize(
    "text, gone",
    [
        (f"HTTP 401: {{'Authorization': 'Bearer {KEY}'}}", [KEY]),
        ('{"authorization": "Basic dXNlcjpwYXNz"}', ["dXNlcjpwYXNz"]),
        ("x-api-key: abcd1234 and api_key=zzzz9999&q=1", ["abcd1234", "zzzz9999"]),
        (f"key in a JSON string: {json.dumps(KEY + '/x')[1:-1]}", [KEY]),
        ("Bearer tok_123456789", ["tok_123456789"]),
    ],
)
def test_scrub_rows(text: str, gone: list[str]) -> None:
    out = scrub(text, [KEY])
    assert all(g not in out for g in gone) and REDACTED in out


def test_error_line_never_keeps_half_a_key() -> None:
    body = "x" * 280 + f" you sent {KEY} and Authorization: Bearer {KEY}"
    line = describe(401, body, secrets=[KEY])
    assert KEY[:8] not in line and line.startswith("HTTP 401: ")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("hostile") / "server.log"
    log.touch()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "hostile_server.py"), str(log)], stdout=subprocess.PIPE, text=True
    )
    port = int(proc.stdout.readline())  # type: ignore[union-attr]  # stdout=PIPE
    yield f"http://127.0.0.1:{port}/v1", log
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def runs(hostile: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Path, list]:
    url, log = hostile
    out = tmp_path_factory.mktemp("runs")
    env = {**os.environ, "OPENAI_API_KEY": KEY, "EVALKIT_DATA_DIR": str(data_dir)}
    common = ["--base-url", url, "--out", str(out), "--server-log", str(log)]
    commands = {
        "bench": ["bench", *common, "--name", "bench", "--runs", "1", "--max-tokens", "8", "--concurrency", "2"],
        "stress": [
            "stress",
            *common,
            "--name",
            "stress",
            "--cycles",
            "1",
            "--seed",
            "1",
            "--long-tokens",
            "300",
            "--no-progress",
        ],
        "capability": [
            "capability",
            *common,
            "--name",
            "capability",
            "--thinking",
            "off",
            "--limit",
            "2",
            "--datasets",
            "gsm8k,humanevalplus",
            "--concurrency",
            "2",
            "--unsafe-exec",
        ],
        "load": ["load", *common, "--name", "load", "--concurrency", "2", "--requests", "8"],
        "check": ["check", "--base-url", url, "--out", str(out), "--name", "check"],
    }
    done = []
    for name, argv in commands.items():
        p = subprocess.run([*EVALKIT, *argv], capture_output=True, text=True, timeout=300, env=env)
        done.append((name, p))
    finished = [str(out / n) for n in ("bench", "stress", "capability", "load") if (out / n / "summary.json").exists()]
    report = out / "report.md"
    p = subprocess.run(
        [*EVALKIT, "report", *finished, "-o", str(report)], capture_output=True, text=True, timeout=300, env=env
    )
    done.append(("report", p))
    rules = out / "rules.toml"
    # A metric every bench summary has, whichever requests the hostile server failed (a rate can be null).
    rules.write_text('[[rule]]\nmetric = "bench.concurrent.streams"\nop = ">="\nvalue = 1e9\n')
    p = subprocess.run(
        [*EVALKIT, "gate", str(out / "bench"), "--rules", str(rules), "--junit", str(out / "j.xml")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    done.append(("gate", p))
    return out, done


def test_the_server_did_echo_the_key(hostile: tuple[str, Path], runs: tuple[Path, list]) -> None:
    _, log = hostile
    assert KEY in log.read_text()  # the server saw the key and sent it back on every path


def test_every_command_ran_against_it(runs: tuple[Path, list]) -> None:
    out, done = runs
    for name in ("bench", "stress", "capability", "load", "check"):
        assert (out / name / "manifest.json").exists(), (name, dict(done)[name].stderr[-1500:])
    # The server's echoes reached the run files, scrubbed: which requests met which error depends on how many
    # probes the preflight sent first (the server's cycle of answers is global), so look across every run's lines.
    requests = "".join((out / n / "requests.jsonl").read_text() for n in ("bench", "stress", "load"))
    assert "HTTP 40" in requests and "HTTP 500" in requests and REDACTED in requests
    assert REDACTED in (out / "bench" / "server_log.jsonl").read_text()
    assert (out / "report.md").exists() and (out / "j.xml").exists()


def test_no_key_printed(runs: tuple[Path, list]) -> None:
    _, done = runs
    for name, p in done:
        assert KEY not in p.stdout and KEY not in p.stderr, name


def test_no_key_in_any_file(runs: tuple[Path, list]) -> None:
    out, _ = runs
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) > 20
    leaked = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert not leaked


def test_run_files_are_owner_only(runs: tuple[Path, list]) -> None:
    out, _ = runs
    for name in ("bench", "stress", "capability", "load", "check"):
        for p in (out / name).iterdir():
            if p.suffix in (".json", ".jsonl"):
                assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


# --- issue #56: keys with whitespace inside or around them, a key a header cannot carry, a password in a URL ----------
ODD_KEYS = {
    "space-inside-and-after": f"sk-hostile-{secrets.token_hex(6)} {secrets.token_hex(6)} ",
    "tab-inside": f"sk-hostile-{secrets.token_hex(6)}\t{secrets.token_hex(6)}",
    "two-spaces": f"sk-hostile-{secrets.token_hex(6)}  {secrets.token_hex(6)}",
}


@pytest.mark.parametrize("which", sorted(ODD_KEYS))
def test_a_key_with_whitespace_is_scrubbed_everywhere(
    which: str, hostile: tuple[str, Path], tmp_path: Path, data_dir: Path
) -> None:
    # The server strips a header's value, and echoes the pieces of a key as it parsed them: before #56 the pieces
    # reached requests.jsonl, summary.json and stderr.
    key = ODD_KEYS[which]
    url, _ = hostile
    env = {**os.environ, "OPENAI_API_KEY": key, "EVALKIT_DATA_DIR": str(data_dir)}
    common = ["--base-url", url, "--out", str(tmp_path)]
    done = [
        subprocess.run([*EVALKIT, *argv, *common], capture_output=True, text=True, timeout=300, env=env)
        for argv in (
            ["bench", "--name", "b", "--runs", "1", "--max-tokens", "8"],
            ["capability", "--name", "c", "--thinking", "off", "--limit", "3", "--datasets", "gsm8k"],
            ["check", "--name", "k"],
        )
    ]
    assert (tmp_path / "b" / "requests.jsonl").exists() and (tmp_path / "c" / "graded.jsonl").exists()
    pieces = [p for p in key.split() if len(p) >= 8]
    texts = [p.stdout + p.stderr for p in done] + [f.read_text() for f in tmp_path.rglob("*") if f.is_file()]
    leaked = [p for p in pieces for t in texts if p in t]
    assert not leaked, leaked


@pytest.mark.parametrize("whose", ["server", "judge"])
def test_a_key_no_header_can_carry_is_refused_unprinted(whose: str, tmp_path: Path, hostile: tuple[str, Path]) -> None:
    url, _ = hostile
    key = f"sk-hostile-{secrets.token_hex(8)}\n{secrets.token_hex(8)}"  # a key file's line break kept
    env = {**os.environ, "OPENAI_API_KEY": key, "JUDGE_KEY": key}
    argv = ["bench", "--base-url", url, "--out", str(tmp_path)]
    if whose == "judge":
        env.pop("OPENAI_API_KEY")
        argv = ["capability", "--thinking", "off", "--base-url", url, "--out", str(tmp_path), "--judge-url", url]
        argv += ["--judge-model", "m", "--judge-api-key-env", "JUDGE_KEY"]
    p = subprocess.run([*EVALKIT, *argv], capture_output=True, text=True, env=env)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "line break" in lines[0], p.stderr
    assert all(piece not in p.stdout + p.stderr for piece in key.split())


@pytest.mark.parametrize(
    "url",
    [
        "http://alice:hunter2-PASSWORD@127.0.0.1:9/v1",
        "http://sk-TOKEN-IN-USERNAME@127.0.0.1:9/v1",
        "http://a:PASSWORD@[::1",
    ],
)
@pytest.mark.parametrize("how", ["flag", "env", "judge"])
def test_a_password_in_the_base_url_is_refused_unprinted(url: str, how: str, tmp_path: Path) -> None:
    env = {**os.environ, **({"EVALKIT_BASE_URL": url} if how == "env" else {})}
    argv = ["check", "--out", str(tmp_path), *(["--base-url", url] if how == "flag" else [])]
    if how == "judge":  # the judge's URL was written into the manifest whole
        argv = ["capability", "--thinking", "off", "--judge-url", url, "--judge-model", "m", "--out", str(tmp_path)]
    p = subprocess.run([*EVALKIT, *argv], capture_output=True, text=True, env=env, timeout=60)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "PASSWORD" not in p.stderr + p.stdout and "TOKEN" not in p.stderr + p.stdout, p.stderr
