"""Scrub before cutting (issue #39): wherever a server's words are shortened, a key planted across the cut point is
gone whole, not cut to a head that no later scrub recognises. Each cut point has its row (the key straddling it at
several offsets); the model-list refusal and the manifest's server identity run over real HTTP against a server
that plants the key across their cuts."""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from evalkit.client.http_errors import describe
from evalkit.client.probe import Reply, refusal_words
from evalkit.evidence.server_identity import identify
from evalkit.evidence.server_log import summarize_log
from evalkit.evidence.server_metrics import parse_metrics
from evalkit.redact import excerpt
from evalkit.runs.failures import count_failures
from evalkit.session.connect import _not_a_model_list

KEY = "sk-straddle-" + secrets.token_hex(16)
SECRET = KEY[len("sk-straddle-") :]


def _leaks(text: str) -> bool:
    """Whether any 6 characters in a row of the key's secret part are in `text` (a head, a tail or the whole)."""
    return any(SECRET[i : i + 6] in text for i in range(len(SECRET) - 5))


EVALKIT = [sys.executable, "-m", "evalkit"]


def _planted(cut: int, offset: int, before: str = "", after: str = " and more words after it") -> str:
    """Text whose key's secret part starts `offset` characters before character `cut` (the cut goes through it)."""
    start = cut - offset - len(before) - (len(KEY) - len(SECRET))
    return "x" * start + before + KEY + after


OFFSETS = [6, len(SECRET) // 2, len(SECRET) - 6]

# (name, the cut, the text the server's words go through, what comes out) - known key or credential pattern.
CUTS: list[tuple[str, int, str, Callable[[str], str]]] = [
    ("http error body", 300, "", lambda body: describe(401, body, secrets=[KEY])),
    (
        "preflight and check refusal",
        300,
        "",
        lambda body: refusal_words(Reply(status=401, body=body), {}, (KEY,)),
    ),
    (
        "model list refusal",
        200,
        "",
        lambda body: str(_not_a_model_list("http://h/v1", 200, "text/html", body, KEY, "not JSON")),
    ),
    ("metrics parse error", 200, "api_key=", lambda text: excerpt(text, 200)),
    ("failure key", 160, "Authorization: Bearer ", lambda err: count_failures([err], 1).top_error or ""),
    (
        "flagged log line",
        500,
        "x-api-key: ",
        lambda line: summarize_log([{"t": 0.0, "line": line, "flags": ["f"]}])["flagged_lines"][0]["line"],
    ),
]


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("name,cut,before,shorten", CUTS, ids=[c[0] for c in CUTS])
def test_a_key_across_the_cut_is_gone_whole(
    name: str, cut: int, before: str, shorten: Callable[[str], str], offset: int
) -> None:
    planted = _planted(cut, offset, before)
    assert _leaks(planted[:cut])  # the cut goes through the key
    out = shorten(planted)
    assert not _leaks(out), out[-120:]
    assert "[redac" in out, out[-120:]


def test_a_metrics_parse_error_is_scrubbed_before_its_cut() -> None:
    text = "x" * 150 + " api_key=" + KEY + " {{{ not prometheus\n"
    with pytest.raises(Exception) as e:  # MetricsError, whatever the parser's own message
        parse_metrics(text)
    assert not _leaks(str(e.value))


# --- over real HTTP -------------------------------------------------------------------------------------------
def _serve(app: web.Application) -> Iterator[str]:
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    import threading

    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
        loop.close()


@pytest.fixture(scope="module")
def straddler() -> Iterator[str]:
    """/v1/models answers HTML with the key across character 200; /props a model path with it across 300."""

    async def models(request: web.Request) -> web.Response:
        return web.Response(text=_planted(200, 7, "<html>"), content_type="text/html")

    async def props(request: web.Request) -> web.Response:
        body = {"default_generation_settings": {"n_ctx": 4096}, "model_path": _planted(300, 9, "/models/")}
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_get("/props", props)
    yield from _serve(app)


def test_bench_refusal_of_a_model_list_never_keeps_half_a_key(straddler: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [*EVALKIT, "bench", "--base-url", straddler, "--out", str(tmp_path), "--name", "b", "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"OPENAI_API_KEY": KEY, "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2 and "not JSON" in proc.stderr, proc.stderr[-2000:]
    assert not _leaks(proc.stderr + proc.stdout)


def test_server_identity_scrubs_props_before_cutting(straddler: str) -> None:
    got = asyncio.run(identify(straddler, {"Authorization": f"Bearer {KEY}"}))
    text = json.dumps(got)
    assert got["server_type"] == "llama.cpp" and "/models/" in got["props"]["model_path"]
    assert not _leaks(text) and "/models/[redac" in text, got["props"]
