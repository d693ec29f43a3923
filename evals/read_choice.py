"""Choice readers (MuSR and the `choice` user-eval extractor), issue #55: every place of `read_spans` read for a
choice with MuSR's rules, the choice matcher by number and by text as two readings (`ANSWER: 2 (Mia)` is choice 2
by number and Mia's number by text), the concluding sentence, the last line naming exactly one choice (a
fallback), and the re-check statements after the answer (`LATER`). Readings compare by the choice (two choices
with the same trimmed text are one key)."""

from __future__ import annotations

from evalkit_evals import musr, read_spans
from evalkit_evals.read_spans import Span
from evalkit_evals.sureness import Found, Strength


def key(choices: list[str], n: int | None) -> str | None:
    """The comparison key of a 1-based choice: the first choice with the same trimmed text (None for none)."""
    if n is None:
        return None
    return str(next(i for i in range(1, len(choices) + 1) if musr._same(choices, i, n)))


def _found(rule: str, strength: Strength, n: int | None, choices: list[str], gold: int, at: int) -> Found:
    if n is None:
        return Found(rule, strength, None, at=at)
    return Found(rule, strength, str(n), key(choices, n), musr._same(choices, n, gold), at)


def _from(span: Span, choices: list[str], gold: int) -> list[Found]:
    rule = f"choice.{span.rule}"
    if span.rule == "last_line":
        named = musr.named_choices(musr._MARKUP.sub("", span.text), choices)
        return [_found(rule, span.strength, named[0] if len(named) == 1 else None, choices, gold, span.at)]
    read = musr._read_text(span.text, choices, "", rule)
    if read.hedged:
        shown = " | ".join(map(str, read.hedged))
        return [Found(rule, span.strength, shown, f"hedge:{shown}", False, span.at)]
    if read.rule == "musr.number_text_conflict":
        by_number, by_text = (int(r.value or 0) for r in read.readings)
        return [
            _found(f"{rule}.number", span.strength, by_number, choices, gold, span.at),
            _found(f"{rule}.text", span.strength, by_text, choices, gold, span.at),
        ]
    return [_found(rule, span.strength, read.choice, choices, gold, span.at)]


def readings(answer: str, choices: list[str], gold: int) -> list[Found]:
    """Every choice reader's reading of `answer` (1-based `gold`), then the later statements."""
    out: list[Found] = []
    taken: set[tuple[str, Strength]] = set()
    for span in read_spans.spans(answer):
        if span.rule == "first" or (span.rule == "label" and not span.text.strip()):
            continue
        found = _from(span, choices, gold)
        if span.rule in ("label", "bold"):  # the last hit that names a choice reads
            if (span.rule, span.strength) in taken or all(f.value is None for f in found):
                continue
            taken.add((span.rule, span.strength))
        out += found
    conclusion = musr._conclusion(answer, choices)
    if conclusion is not None and conclusion.choice is not None:
        out.append(_found("choice.conclusion", Strength.PLAIN, conclusion.choice, choices, gold, len(answer)))
    found_at = [f.at for f in out if f.value is not None]
    if found_at:
        for span in read_spans.later(answer, max(found_at)):
            read = musr._read_text(span.text, choices, "", "choice.recheck")
            if read.choice is not None and not read.hedged and musr._names_first(span.text, choices):
                out.append(_found("choice.recheck", Strength.LATER, read.choice, choices, gold, span.at))
    out += read_spans.withdrawn(answer, "choice")
    return out
