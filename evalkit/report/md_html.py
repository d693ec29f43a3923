"""The little markdown the report's text carries, as HTML for report.html: `code`, **bold**, _italic_/*italic*,
and, in answers written by a model, fenced code blocks. Text is HTML-escaped first, then only these forms become
tags, so nothing in a run's files (a server's words, a model's answer) can add markup of its own.

report.md keeps the markdown as written; the page shows what it means (no literal backticks or asterisks).
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")
_ITALIC_UNDER = re.compile(r"(?<![\w_])_(?=[^\s_])([^_\n]+?)(?<=[^\s_])_(?![\w_])")
_FENCE = re.compile(r"^```[^\n`]*\n(.*?)(?:^```[ \t]*$|\Z)", re.S | re.M)
_SLOT = "\x00{}\x00"


def _spans(text: str) -> str:
    """Escaped text with its inline forms as tags; code spans are set aside first, so nothing inside them is read
    as bold or italic (a metric key's underscores stay underscores)."""
    codes: list[str] = []

    def keep(m: re.Match[str]) -> str:
        codes.append(f"<code>{escape(m.group(1))}</code>")
        return _SLOT.format(len(codes) - 1)

    rest = _CODE.sub(keep, text.replace("\x00", ""))
    out = str(escape(rest))
    out = _BOLD.sub(r"<b>\1</b>", out)
    out = _ITALIC_STAR.sub(r"<i>\1</i>", out)
    out = _ITALIC_UNDER.sub(r"<i>\1</i>", out)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], out)


def inline(value: object) -> Markup:
    """One line or cell of the report's text as HTML (markdown's inline forms rendered, the rest escaped)."""
    if value is None:
        return Markup("")
    if isinstance(value, Markup):
        return value
    return Markup(_spans(str(value)))


def block(value: object) -> Markup:
    """A model's answer or reasoning as HTML: fenced code blocks as <pre><code>, the text between them as
    preformatted text with its inline forms rendered (line breaks kept, as the model wrote them)."""
    if value is None:
        return Markup("")
    text = str(value)
    parts: list[str] = []
    last = 0
    for m in _FENCE.finditer(text):
        if m.start() > last:
            parts.append(f'<pre class="prose">{_spans(text[last : m.start()].strip(chr(10)))}</pre>')
        parts.append(f"<pre><code>{escape(m.group(1).rstrip(chr(10)))}</code></pre>")
        last = m.end()
    if last < len(text):
        tail = text[last:].strip("\n")
        if tail:
            parts.append(f'<pre class="prose">{_spans(tail)}</pre>')
    return Markup("".join(parts))


_NUMERIC = re.compile(r"^\s*(?:[-+−–]?\d|[-+−]\.\d|–\s*(?:\(|$)|n/a\b|▲|▼|≈)")


def numeric_cell(value: object) -> bool:
    """Whether a table cell is a figure (a number, a figure with its interval or mark, or '–' for none), which the
    page right-aligns; words and code read left-aligned."""
    return value is not None and bool(_NUMERIC.match(str(value)))
