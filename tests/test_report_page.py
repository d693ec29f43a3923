"""report.html in a real browser: the demo's page opened in headless Chromium (Debian's `chromium`, driven by
Playwright with the system executable, no browser download) with the network cut off. No console errors; every
section there with the figures of summary.json; every table's cells equal report.md's; a timeline lane per request
of the first stress cycle; one file under 5 MB. Screenshots go into the test's tmp dir.

Skips only when Chromium or Playwright is absent and CI is not set; in CI (`CI=true`, .ci/run installs chromium) a
missing browser fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
MAX_BYTES = 5_000_000


def _browser_or_skip() -> Any:
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append("chromium is not installed (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("playwright is not installed (pip install -e '.[test]')")
        sync_playwright = None
    if missing:
        if os.environ.get("CI"):
            pytest.fail("CI must check report.html in a browser: " + "; ".join(missing))
        pytest.skip("; ".join(missing))
    return sync_playwright


def md_shown(text: str) -> str:
    """Markdown's inline forms as a browser shows them rendered: `code` and **bold** without their marks."""
    text = re.sub(r"`([^`\n]+)`", r"\1", text)
    return re.sub(r"\*\*(\S.*?\S|\S)\*\*", r"\1", text)


def _md_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [md_shown(c.strip().replace("\\|", "|").replace("<br>", "\n")) for c in cells]


def md_tables(text: str) -> dict[str, list[list[str]]]:
    """Each `### title` table of a report.md: its body rows, cells unescaped."""
    out: dict[str, list[list[str]]] = {}
    lines = text.splitlines()
    title = None
    for i, ln in enumerate(lines):
        if ln.startswith("### "):
            title = ln[4:].strip()
        elif title and ln.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            rows, j = [], i + 2
            while j < len(lines) and lines[j].startswith("| "):
                rows.append(_md_row(lines[j]))
                j += 1
            out.setdefault(title, rows)
            title = None
    return out


HTML_TABLES = """() => Array.from(document.querySelectorAll("table.data")).filter(t => t.caption).map(t => [
  t.caption.textContent.trim(), t.dataset.key,
  Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(c => c.textContent.trim()))])"""


def test_demo_page_in_headless_chromium(demo_report: Path, tmp_path: Path) -> None:
    sync_playwright = _browser_or_skip()
    folder = demo_report.parent
    page_file = folder / "report.html"
    assert page_file.stat().st_size < MAX_BYTES
    md = demo_report.read_text()
    errors: list[str] = []
    asked: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        ctx = browser.new_context(offline=True, viewport={"width": 1400, "height": 1000})

        def route(r: Any) -> None:  # the page may read itself, nothing else
            if r.request.url.startswith("file:") and r.request.url.endswith("report.html"):
                r.continue_()
            else:
                asked.append(r.request.url)
                r.abort()

        ctx.route("**/*", route)
        page = ctx.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_file.as_uri())
        page.wait_for_function("document.body.getAttribute('data-plots') !== null", timeout=30_000)
        assert page.evaluate("document.body.getAttribute('data-plots')") == "drawn"
        page.screenshot(path=str(tmp_path / "report-top.png"))
        page.locator("div.timeline").first.screenshot(path=str(tmp_path / "report-timeline.png"))

        # The answer first, then every section.
        ids = page.evaluate("Array.from(document.querySelectorAll('body > section')).map(s => s.id)")
        assert ids[0] == "answer"
        for sid in ("builds", "section-bench", "section-capability", "section-stress", "timelines", "distributions"):
            assert sid in ids, sid

        # Figures of summary.json where the tables show them.
        tables = {caption: rows for caption, _, rows in page.evaluate(HTML_TABLES)}
        by_key = {key: rows for _, key, rows in page.evaluate(HTML_TABLES)}
        bench = json.loads((folder / "after-bench" / "summary.json").read_text())
        code_row = next(r for r in by_key["bench"] if r[0] == "code")
        assert code_row[2].startswith(f"{bench['prompts']['code']['tok_s']:.1f} ")
        stress = json.loads((folder / "after-stress" / "summary.json").read_text())
        row = next(r for r in by_key["stress"] if r[0] == "short_insert_ttft_s p95")
        assert row[2].startswith(f"{stress['metrics']['short_insert_ttft_s']['p95']:.2f} ")
        cap = json.loads((folder / "after-capability" / "summary.json").read_text())["total"]
        total = next(r for r in by_key["capability_off"] if r[0] == "total")
        assert total[2].startswith(f"{cap['correct']}/{cap['total']}")

        # Every table's cells equal report.md's, and every summary line is report.md's.
        mdt = md_tables(md)
        shared = [c for c in tables if c in mdt]
        assert len(shared) >= 8, shared
        for caption in shared:
            assert tables[caption] == mdt[caption], caption
        for text in page.evaluate(
            "Array.from(document.querySelectorAll('li.answer-line .text')).map(e => e.textContent)"
        ):
            assert text in md_shown(md)

        # The markdown the page is given reads rendered (issue #58): no literal backticks or bold/italic asterisks
        # in the text a reader sees (the tables, notes, answer lines, and the models' answers folded in the flips
        # table), metric keys and code as <code>; figures right-aligned, words and code left-aligned.
        shown = page.evaluate(
            """() => { const b = document.body.cloneNode(true);
            b.querySelectorAll('script, style').forEach(e => e.remove());
            b.querySelectorAll('details').forEach(e => e.setAttribute('open', ''));
            return b.textContent; }"""
        )
        assert "`" not in shown, re.findall(r".{0,60}`.{0,60}", shown)[:5]
        assert not re.search(r"\*\*|(?<![\w*])\*\w[^*\n]*\w\*(?![\w*])", shown), re.findall(r".{0,60}\*.{0,60}", shown)[
            :5
        ]
        assert page.locator("li.answer-line .text code").count() + page.locator("table.data td code").count() > 0
        aligns = page.evaluate(
            """() => Array.from(document.querySelectorAll('table.data td')).map(td =>
              [td.textContent.trim(), getComputedStyle(td).textAlign, td.querySelector('code') !== null])"""
        )
        assert all(align != "right" for _, align, has_code in aligns if has_code)
        assert any(align == "right" and re.match(r"[-+]?\d", text) for text, align, _ in aligns)

        # A lane per request of the first cycle, in the lane table and on the plot's axis.
        for label in ("before", "after"):
            lines = [json.loads(x) for x in (folder / f"{label}-stress" / "requests.jsonl").read_text().splitlines()]
            n = sum(1 for x in lines if x.get("cycle") == 1)
            sel = f"div.timeline[data-label='{label}'][data-first='yes']"
            assert page.locator(f"{sel} tr.lane").count() == n > 0
            assert page.locator(f"{sel} .ytick").count() == n

        # The capability flips filter (JavaScript) hides rows; without it every row shows.
        if page.locator("tr.flip").count():
            page.select_option("#flip-change", "right→wrong")
            shown = page.evaluate(
                "Array.from(document.querySelectorAll('tr.flip')).filter(r => r.style.display !== 'none').length"
            )
            assert shown == page.locator("tr.flip[data-change='right→wrong']").count()
        # Without JavaScript the tables still read: the same tables, the same cells.
        plain = browser.new_context(offline=True, java_script_enabled=False).new_page()
        plain.goto(page_file.as_uri())
        assert plain.evaluate("document.body.getAttribute('data-plots')") is None  # no script of the page ran
        assert {caption: rows for caption, _, rows in plain.evaluate(HTML_TABLES)} == tables
        browser.close()
    assert errors == []
    assert asked == []
    assert (tmp_path / "report-timeline.png").stat().st_size > 10_000
