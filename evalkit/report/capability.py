"""The capability section of a report: scores with paired marks, whether two runs can be compared at all, the
questions that changed between them, and how the model answered (tokens, truncation, speed seen on the way).

Everything is read from each run directory's files (summary.json, manifest.json, graded.jsonl, requests.jsonl).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast

from evalkit.report import noise, trust
from evalkit.report.formatting import num
from evalkit.report.grade_review import review_tables
from evalkit.report.runs import LabelledRun
from evalkit.report.tables import Table
from evalkit.runs.schemas import GradedLine, Score, UnderLoadComparison
from evalkit.stats import mcnemar_exact_p, median
from evalkit_evals import registry
from evalkit_evals.question_scores import QuestionScore, paired_changes, pass_at_1, question_scores

NOT_COMPARABLE = "not comparable"
RIGHT_TO_WRONG, WRONG_TO_RIGHT = "right_to_wrong", "wrong_to_right"
_ARROWS = {RIGHT_TO_WRONG: "right→wrong", WRONG_TO_RIGHT: "wrong→right"}


@dataclass(frozen=True)
class QuestionChange:
    """One question whose score moved between a baseline run and another run of the same thinking mode."""

    qid: str
    dataset: str
    change: str
    before: QuestionScore
    after: QuestionScore

    def export_line(self, mode: str, before_label: str, after_label: str, why: list[str]) -> ChangedLine:
        """A line of the `--changed-only` export (`why`: the reasons the runs do not compare, if any)."""

        def side(label: str, s: QuestionScore) -> ChangedSide:
            return {
                "label": label,
                "score": s.score,
                "outcomes": list(s.outcomes),
                "extracted": list(s.extracted),
                "why": list(s.whys),
            }

        line: ChangedLine = {
            "thinking": mode,
            "id": self.qid,
            "dataset": self.dataset,
            "change": self.change,
            "before": side(before_label, self.before),
            "after": side(after_label, self.after),
            "comparable": not why,
        }
        if why:
            line["not_comparable"] = why
        return line


class ChangedSide(TypedDict):
    """One run's side of a changed question in the `--changed-only` export."""

    label: str
    score: float
    outcomes: list[str]
    extracted: list[object]
    why: list[str]


class ChangedLine(TypedDict, total=False):
    """A line of the `--changed-only` export: one question whose score moved, both sides, and whether the two
    runs compare at all (`not_comparable`: why not)."""

    thinking: str
    id: str
    dataset: str
    change: str
    before: ChangedSide
    after: ChangedSide
    comparable: bool
    not_comparable: list[str]


def _scores(run: LabelledRun) -> dict[str, QuestionScore]:
    return question_scores(run.graded())


def _dataset_of(qid: str) -> str:
    return qid.split(":", 1)[0]


def comparability(base: LabelledRun, other: LabelledRun) -> list[str]:
    """Why a before/after verdict between two capability runs would mislead; empty when they compare."""
    reasons = []
    a, b = _scores(base), _scores(other)
    if a and b and set(a) != set(b):
        reasons.append(
            f"they graded different questions ({len(a)} vs {len(b)}: {len(set(a) - set(b))} only in "
            f"{base.label}, {len(set(b) - set(a))} only in {other.label})"
        )
    elif not (a and b):
        totals = [{ds: s.total for ds, s in r.capability().scores.items()} for r in (base, other)]
        if totals[0] != totals[1]:
            reasons.append("their datasets or question counts differ")
    hashes = [{g.id: g.row_hash for g in r.graded()} for r in (base, other)]
    moved = [
        q for q in set(hashes[0]) & set(hashes[1]) if hashes[0][q] and hashes[1][q] and hashes[0][q] != hashes[1][q]
    ]
    if moved:
        reasons.append(f"{len(moved)} question(s) have different text (row_hash), e.g. {sorted(moved)[0]}")
    qa, qb = base.run.manifest.get("question_set"), other.run.manifest.get("question_set")
    if qa is not None and qb is not None and qa != qb:
        reasons.append("different question-set manifests")
    # Templates of datasets only one run asked are already a difference of questions.
    ta, tb = base.run.manifest.get("prompt_templates"), other.run.manifest.get("prompt_templates")
    changed = (
        [k for k in sorted(set(ta) & set(tb)) if ta[k] != tb[k]]
        if isinstance(ta, dict) and isinstance(tb, dict)
        else []
    )
    if changed:
        reasons.append(f"different prompt templates ({', '.join(changed)})")
    for r in (base, other):
        errors = r.capability().total.outcomes.get("error")
        if errors:
            reasons.append(f"{r.label} has {errors} error outcome(s)")
    return reasons


def question_changes(base: LabelledRun, other: LabelledRun) -> list[QuestionChange]:
    """Questions both runs graded whose score went down (right→wrong) or up (wrong→right), in dataset order; a
    question unsure on either side is can't tell (`cant_tell`), never a change."""
    a, b = _scores(base), _scores(other)
    out = []
    for qid in a:
        if qid in b and a[qid].score != b[qid].score and not (a[qid].unsure or b[qid].unsure):
            change = RIGHT_TO_WRONG if b[qid].score < a[qid].score else WRONG_TO_RIGHT
            out.append(QuestionChange(qid, a[qid].dataset, change, a[qid], b[qid]))
    rank = {ds: i for i, ds in enumerate(registry.names())}
    return sorted(out, key=lambda c: (rank.get(c.dataset, 99), c.change, c.qid))


def cant_tell(base: LabelledRun, other: LabelledRun) -> int:
    """Questions both runs graded whose grade is unsure on either side (issue #55): neither a loss nor a gain."""
    return paired_changes(_scores(base), _scores(other)).cant_tell


def style_change(a: dict[str, QuestionScore], b: dict[str, QuestionScore]) -> str | None:
    """'answer style changed' with its figures when the share of unsure grades moved beyond noise between two runs
    (McNemar's exact test on the questions both graded: sure→unsure against unsure→sure), else None."""
    common = [q for q in a if q in b]
    became = sum(1 for q in common if b[q].unsure and not a[q].unsure)
    left = sum(1 for q in common if a[q].unsure and not b[q].unsure)
    if not common or became + left == 0:
        return None
    p = mcnemar_exact_p(became, left)
    if p >= noise.ALPHA:
        return None
    return (
        f"answer style changed: unsure {sum(a[q].unsure for q in common)} → {sum(b[q].unsure for q in common)} "
        f"of {len(common)} ({became} became unsure, {left} became sure, p={p:.3g})"
    )


def paired_verdict(a: dict[str, QuestionScore], b: dict[str, QuestionScore]) -> noise.NoiseVerdict:
    """McNemar marks for two runs' per-question scores (the capability report's and `--under-load`'s)."""
    # McNemar's exact test on per-question means: with one sample a question it is the classic test; with
    # repeats it is the sign test of the questions whose mean moved.
    pc = paired_changes(a, b)
    lost, gained = pc.lost, pc.gained
    p = mcnemar_exact_p(lost, gained)
    detail = f"{pc.paired} paired, {lost} lost, {gained} gained, {pc.cant_tell} can't tell (unsure), p={p:.3g}"
    if not pc.paired:
        return noise.NoiseVerdict(noise.UNKNOWN, "mcnemar", "no question answered by both runs")
    if p >= noise.ALPHA:
        return noise.NoiseVerdict(noise.WITHIN, "mcnemar", detail)
    return noise.NoiseVerdict(noise.BETTER if gained > lost else noise.WORSE, "mcnemar", detail)


def _score_cell(entry: Score | None, scores: dict[str, QuestionScore], ds: str) -> tuple[str, float | None]:
    mine = [s for q, s in scores.items() if ds == "total" or _dataset_of(q) == ds]
    p1 = pass_at_1(mine)
    if p1 is not None and p1.repeats > 1:
        return f"{p1.value:.3f} [{p1.low:.3f}, {p1.high:.3f}]", p1.value * p1.questions
    if entry is None:
        return "–", None
    if entry.sure_correct is not None:  # issue #55: pass@1 is sure-correct / N
        return f"{entry.sure_correct}/{entry.total}", entry.sure_correct
    return f"{entry.correct}/{entry.total}", entry.correct


def interval_text(entry: Score) -> str:
    """`[47, 49]/50`: the score if every unsure line is wrong and if every one is right."""
    lo = entry.sure_correct if entry.sure_correct is not None else entry.correct
    hi = lo + (entry.unsure or 0)
    return f"[{num(lo, 4)}, {num(hi, 4)}]/{entry.total}"


def _ambiguous_note(entry: Score | None) -> str:
    if entry is not None and entry.unsure is not None:
        return f" · {num(entry.unsure, 4)} unsure {interval_text(entry)}" if entry.unsure else ""
    n = entry.ambiguous if entry is not None else None
    return f" · {n} ambiguous" if n else ""


def _outcome_counts(entry: Score) -> str:
    return " / ".join(str(entry.outcomes.get(k, "–")) for k in ("unparsed", "truncated", "error"))


def score_tables(group: list[LabelledRun], mode: str) -> list[Table]:
    """Correct answers (or pass@1 over repeats) by dataset and in total, marks against the first column."""
    cols = [r.label for r in group]
    scores = [_scores(r) for r in group]
    reasons: list[list[str]] = [[]] + [comparability(group[0], r) for r in group[1:]]
    records = [r.capability() for r in group]
    datasets = [d for d in registry.names() if any(d in c.scores for c in records)]
    datasets += sorted({d for c in records for d in c.scores} - set(datasets))
    rows: list[tuple[str, list[str]]] = []
    style_notes: list[str] = []
    for ds in [*datasets, "total"]:
        entries = [c.total if ds == "total" else c.scores.get(ds) for c in records]
        cells, base_value = [], None
        for i, (entry, sc) in enumerate(zip(entries, scores)):
            text, value = _score_cell(entry, sc, ds)
            if i == 0:
                base_value = value
            elif value is not None:
                if reasons[i]:
                    text += f" {NOT_COMPARABLE}"
                else:
                    if base_value is not None and isinstance(value, int) and isinstance(base_value, int):
                        text += f" ({value - base_value:+d})"
                    mine = [
                        {q: s for q, s in x.items() if ds == "total" or _dataset_of(q) == ds} for x in (scores[0], sc)
                    ]
                    text += f" {paired_verdict(*mine).mark}" if mine[0] and mine[1] else f" {noise.UNKNOWN}"
                    style = style_change(*mine) if mine[0] and mine[1] else None
                    if style:
                        text += f" ({style.split(':')[0]})"
                        style_notes.append(f"{group[i].label}, {ds}: {style}.")
            cells.append(text + _ambiguous_note(entry))
        rows.append((ds, cells))
    rows.append(("unparsed / truncated / error", [_outcome_counts(c.total) for c in records]))
    if any("ambiguous" in c.total.model_fields_set for c in records):
        notes_ambiguous = True
        rows.append(
            (
                "ambiguous (two readings disagree)",
                [str(c.total.ambiguous) if "ambiguous" in c.total.model_fields_set else "–" for c in records],
            )
        )
    else:
        notes_ambiguous = False
    if any(c.total.unsure is not None for c in records):
        rows.append(
            (
                "unsure (readings disagree, a fallback alone, nothing read)",
                [
                    f"{num(c.total.unsure, 4)} {interval_text(c.total)}" if c.total.unsure is not None else "–"
                    for c in records
                ],
            )
        )
    if any(c.judge is not None for c in records):
        rows.append(
            (
                "judge: lines sent / disagree with the rules",
                [f"{c.judge.sent} / {c.judge.disagree}" if c.judge is not None else "–" for c in records],
            )
        )
    notes = [
        "Marks by McNemar's exact test on the questions both runs answered (graded.jsonl; with repeats, on "
        "per-question mean scores); ? when a run has no graded.jsonl."
    ]
    if any(p and p.repeats > 1 for p in (pass_at_1(list(s.values())) for s in scores)):
        notes.append(
            "pass@1 is the mean over questions of each question's mean score across repeats, with a 95% "
            "interval; agreement is the share of questions whose repeats all got the same verdict: "
            + ", ".join(
                f"{r.label} {p.agreement:.0%} over {p.repeats} repeats"
                for r, p in ((r, pass_at_1(list(s.values()))) for r, s in zip(group, scores))
                if p
            )
            + "."
        )
    if any(c.total.unsure is not None for c in records):
        notes.append(
            "Scores count sure grades only (pass@1 = sure-correct / N); unsure grades are shown with the interval "
            "[sure-correct, sure-correct + unsure] / N, and a question unsure in either run is can't tell in the "
            "marks, never a loss or a gain. A grade is sure when the strongest readings of the answer agree and "
            "nothing after them contradicts them (docs/datasets.md)."
        )
    notes += style_notes
    if notes_ambiguous:
        notes.append(
            "ambiguous: grades where two readings of the answer disagree (e.g. a #### line and a later "
            "'answer is', a choice number and the text beside it); graded.jsonl's `readings` holds both "
            "and `rule` names the rule that decided."
        )
    for r, why in zip(group[1:], reasons[1:]):
        if why:
            notes.append(f"{r.label} vs {group[0].label}: {NOT_COMPARABLE}, no verdict: " + "; ".join(why) + ".")
    return [
        Table(
            f"capability_{mode}",
            f"Capability, thinking {mode}: correct answers",
            cols,
            rows,
            notes,
            row_header="dataset",
        )
    ]


def _answer_cell(s: QuestionScore) -> str:
    if s.n == 1:
        return f"{s.extracted[0] if s.extracted[0] is not None else '–'} ({s.outcomes[0]})"
    return f"{s.score:.2f}: " + ", ".join(
        f"{x if x is not None else '–'} ({o})" for x, o in zip(s.extracted, s.outcomes)
    )


def change_tables(group: list[LabelledRun], mode: str) -> list[Table]:
    """Per dataset, the questions that went right→wrong and wrong→right against the first run, with both answers."""
    out = []
    for k, r in enumerate(group[1:], 1):
        if not set(_scores(group[0])) & set(_scores(r)):
            continue  # no question graded by both runs: nothing to pair
        changes = question_changes(group[0], r)
        by_ds: dict[str, list[QuestionChange]] = {}
        for c in changes:
            by_ds.setdefault(c.dataset, []).append(c)
        for ds, mine in by_ds.items():
            lost = sum(c.change == RIGHT_TO_WRONG for c in mine)
            rows = [(c.qid, [_ARROWS[c.change], _answer_cell(c.before), _answer_cell(c.after)]) for c in mine]
            out.append(
                Table(
                    f"capability_changes_{mode}_{k}_{ds}",
                    f"Changed questions, {ds}, thinking {mode}: {group[0].label} → {r.label} "
                    f"({lost} right→wrong, {len(mine) - lost} wrong→right)",
                    ["change", f"{group[0].label}: answer (outcome)", f"{r.label}: answer (outcome)"],
                    rows,
                    row_header="question",
                )
            )
        if not changes:
            out.append(
                Table(
                    f"capability_changes_{mode}_{k}",
                    f"Changed questions, thinking {mode}: {group[0].label} → {r.label}",
                    ["change"],
                    [("(none)", ["no question changed"])],
                    row_header="question",
                )
            )
    return out


def _fmt(v: float | None, digits: int, suffix: str = "") -> str:
    return "–" if v is None else f"{v:.{digits}f}{suffix}"


def _fmt_seconds(v: float | None) -> str:
    """Two decimals from 0.1 s up; below that three significant digits, so a 4 ms TTFT is not shown as 0.00."""
    if v is None:
        return "–"
    return f"{v:.2f}" if v >= 0.1 else num(v)


def answering_tables(group: list[LabelledRun], mode: str) -> list[Table]:
    """Per run and dataset: median reasoning and answer tokens, truncation and unparsed rates, TTFT and tok/s."""
    out = []
    for r in group:
        graded = r.graded()
        if not graded:
            continue
        requests = {x.request_id: x for x in r.requests()}
        max_tokens = r.run.manifest.get("max_tokens")
        thinking = any(g.thinking for g in graded)
        cols = ["reasoning tok p50", "answer tok p50", "truncated", "unparsed", "TTFT p50 s", "decode tok/s p50"]
        if thinking and max_tokens:
            cols.append("budget used by thinking p50")
        rows = []
        by_ds: dict[str, list[GradedLine]] = {}
        for g in graded:
            by_ds.setdefault(g.dataset or _dataset_of(g.id), []).append(g)
        known = registry.names()
        order = [d for d in known if d in by_ds] + sorted(set(by_ds) - set(known))
        for ds in [*order, "all"]:
            mine = graded if ds == "all" else by_ds[ds]
            reqs = [requests[g.request_id] for g in mine if g.request_id in requests]
            n = len(mine)
            cells = [
                _fmt(median([g.reasoning_tokens for g in mine]), 0),
                _fmt(median([g.answer_tokens for g in mine]), 0),
                f"{sum(g.finish_reason == 'length' for g in mine) / n:.0%}",
                f"{sum(g.outcome == 'unparsed' for g in mine) / n:.0%}",
                _fmt_seconds(median([x.ttft_s for x in reqs])),
                _fmt(median([x.decode_tok_s for x in reqs]), 1),
            ]
            if len(cols) > 6:
                used = [g.reasoning_tokens / cast(int, max_tokens) for g in mine if g.reasoning_tokens is not None]
                # a median of one or more numbers (token counts over the manifest's max_tokens)
                cells.append(_fmt(cast(float, median(used)) * 100 if used else None, 0, "%"))
            rows.append((ds, cells))
        notes = [
            "Tokens per answer (reasoning and the answer itself, from graded.jsonl); truncated: hit max_tokens"
            + (f" ({max_tokens})" if max_tokens else "")
            + "; TTFT and decode rate as the client saw them "
            "during the run (requests.jsonl), a free performance signal, not a benchmark."
        ]
        conc = r.run.manifest.get("concurrency")
        if isinstance(conc, int) and conc > 1:
            notes.append(
                f"{r.label} sent {conc} requests at once (--concurrency {conc}): each request's decode rate is "
                "its share of a server serving them together, below one stream alone (bench)."
            )
        flagged = trust.flag_text(r)
        if flagged:
            notes.append(f"⚠ {flagged}: its TTFT and decode figures here are the client's, not the server's.")
        out.append(
            Table(
                f"capability_answering_{mode}_{r.label}",
                f"How the model answered, thinking {mode}: {r.label}",
                cols,
                rows,
                notes,
                row_header="dataset",
            )
        )
    return out


def _modes(runs: list[LabelledRun]) -> dict[str, list[LabelledRun]]:
    modes: dict[str, list[LabelledRun]] = {}
    for r in runs:
        c = r.capability()
        modes.setdefault(str(c.thinking) if "thinking" in c.model_fields_set else "–", []).append(r)
    return modes


def capability_tables(runs: list[LabelledRun]) -> list[Table]:
    """The capability section: per thinking mode, scores, changed questions, then how the model answered."""
    out = []
    for mode, group in _modes(runs).items():
        out += score_tables(group, mode) + change_tables(group, mode) + answering_tables(group, mode)
    return out + under_load_tables(runs) + review_tables(runs)


def under_load_tables(runs: list[LabelledRun]) -> list[Table]:
    """Runs with `--under-load`: the same questions idle and under load, per run (summary.json's `under_load`)."""
    mine = [(r, u) for r in runs if (u := r.capability().under_load) is not None]
    if not mine:
        return []

    def cells(u: UnderLoadComparison) -> list[str]:
        share = u.changed_text_share
        mif = u.background.mean_in_flight if u.background is not None else None
        return [
            str((u.load.source if u.load is not None else None) or "–"),
            f"{u.idle.correct:g}/{u.idle.total}",
            f"{u.loaded.correct:g}/{u.loaded.total} {u.mcnemar['mark']}",
            f"{len(u.lost)} / {len(u.gained)}",
            "–" if share is None else f"{share:.0%}",
            "–" if mif is None else f"{mif:.2f}",
        ]

    rows = [(r.label, cells(u)) for r, u in mine]
    cols = ["load", "idle", "under load", "right→wrong / wrong→right", "answers changed", "background in flight"]
    notes = [
        "Each run asked its questions at idle, then again under its background load. Marks: McNemar's exact test "
        f"on the paired questions ({noise.WORSE} worse beyond noise, {noise.WITHIN} within noise, {noise.BETTER} "
        "better); answers changed counts any change of text; in flight is the background's mean over the pass."
    ]
    return [Table("capability-under-load", "Answers under load", cols, rows, notes, row_header="run")]


def changed_lines(runs: list[LabelledRun]) -> list[ChangedLine]:
    """The `--changed-only` export: one line per changed question per run against its mode's first run."""
    out: list[ChangedLine] = []
    for mode, group in _modes(runs).items():
        for r in group[1:]:
            why = comparability(group[0], r)
            out.extend(c.export_line(mode, group[0].label, r.label, why) for c in question_changes(group[0], r))
    return out


def write_changed_lines(runs: list[LabelledRun], path: Path) -> int:
    """Write the `--changed-only` export as JSONL; returns the number of lines."""
    lines = changed_lines(runs)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    return len(lines)
