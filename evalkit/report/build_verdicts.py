"""The answer first: per candidate build against the baseline, in a few lines with their figures — faster or slower,
answers worse or not, does a short request wait, does a cancel stop the engine, memory and energy where measured —
and the builds themselves: what each is called, which runs of which kind it has, and what differs between them.

A build is a column label (`--labels`, else the build label): its bench, capability, stress and load runs. The
baseline is the first label. Every line keeps its metric key for scripts; a line whose runs flag their own figures
(trust.py) carries `⚠` and never a beyond-noise mark.
"""

from __future__ import annotations

from typing import Any

from evalkit import comparison
from evalkit.evidence.server_identity import IdentityRecord, ServerProps, identity_label
from evalkit.report import formatting, noise, trust
from evalkit.report.capability import cant_tell, comparability, interval_text, question_changes, style_change
from evalkit.report.context import AnswerContext, AnswerLine, Build, BuildAnswer
from evalkit.report.model_rule import ModelNames
from evalkit.report.runs import LabelledRun
from evalkit.runs.schemas import CapabilitySummary
from evalkit.runs.summary_parts import Distribution
from evalkit.stats import mcnemar_exact_p
from evalkit_evals.question_scores import question_scores
from evalkit_stress.verdicts import CANT, NOT_EXERCISED, VerdictReading


def _settings(run: LabelledRun, model: str | None) -> dict[str, str]:
    m = run.run.manifest
    ident = IdentityRecord.of(m)
    props = ident.props or ServerProps()
    out: dict[str, str] = {}
    if model:  # by the report's one rule (evalkit.report.model_rule)
        out["model"] = model
    if m.get("build_label"):
        out["build label"] = str(m["build_label"])
    build = m.get("build")
    for k, v in build.items() if isinstance(build, dict) else ():
        out[f"build {k}"] = str(v)
    if ident.server_type:
        out["server"] = str(ident.server_type)
    ver = ident.version or props.build_info
    if ver:
        out["server version"] = str(ver)
    if isinstance(m.get("concurrency"), int):
        out[f"{run.kind} requests at once"] = str(m["concurrency"])
    for k, v in (("total_slots", props.total_slots), ("n_ctx", props.n_ctx)):
        if v is not None:
            out[f"/props {k}"] = str(v)
    return out


def builds(runs: list[LabelledRun]) -> list[Build]:
    """Each label's build in order of first appearance; its model by the report's one rule (a build whose runs served
    several models names each)."""
    models = ModelNames([r.run.manifest for r in runs])
    out: dict[str, Build] = {}
    for i, r in enumerate(runs):
        b = out.get(r.label)
        model = models.name(i)
        if b is None:
            named = {**r.run.manifest, "model": model} if model else r.run.manifest
            out[r.label] = Build(r.label, identity_label(named) or r.label, [r.kind], _settings(r, model))
        else:
            b.kinds.append(r.kind)
            for k, v in _settings(r, model).items():
                if k == "model" and v not in b.settings.get(k, "").split(", "):
                    b.settings[k] = f"{b.settings[k]}, {v}" if b.settings.get(k) else v
                b.settings.setdefault(k, v)
    return list(out.values())


def differences(bs: list[Build]) -> tuple[list[tuple[str, list[str]]], dict[str, str]]:
    """(settings that differ between the builds, one value per build; settings all builds share)."""
    keys = list(dict.fromkeys(k for b in bs for k in b.settings))
    differ, same = [], {}
    for k in keys:
        vals = [b.settings.get(k, "–") for b in bs]
        if len(set(vals)) > 1:
            differ.append((k, vals))
        else:
            same[k] = vals[0]
    return differ, same


def _of(runs: list[LabelledRun], label: str, kind: str) -> LabelledRun | None:
    return next((r for r in runs if r.label == label and r.kind == kind), None)


def _flags(*rs: LabelledRun | None, budget_weighed: bool = False) -> list[str]:
    """Each run's flags that count against the figure (trust.figure_flags), in a few words."""
    return [
        f"{r.label} {r.kind}: {f.short}" for r in rs if r is not None for f in trust.figure_flags(r, budget_weighed)
    ]


def _rate(v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, (int, float)) else "–"


def _pct(a: float, b: float) -> str:
    return f"{(b - a) / abs(a) * 100:+.1f}%" if a else "–"


def _speed(base: LabelledRun, other: LabelledRun, floor: float) -> list[AnswerLine]:
    flags = _flags(base, other)
    out = []
    ra, rb = base.bench(), other.bench()
    pa, pb = ra.prompts, rb.prompts
    names = [n for n in pa if n in pb and pa[n].tok_s and pb[n].tok_s]
    if names:
        parts, weighed = [], []
        # one question over the prompts: the stratified rank test (3 runs a prompt can reach the level together,
        # where 3 against 3 alone cannot)
        v = noise.from_comparison(
            comparison.compare_stratified([(pa[n].runs, pb[n].runs) for n in names], True, noise.ALPHA, floor)
        )
        for n in names:
            a, b = pa[n], pb[n]
            weighed.append(trust.budget_cannot_explain(v, (a, b), (base, other), floor))
            ta, tb = a.tok_s or 0.0, b.tok_s or 0.0  # both set: `names` keeps only prompts rated in both runs
            parts.append(f"{n} {_rate(ta)} → {_rate(tb)} ({_pct(ta, tb)})")
        decode_flags = _flags(base, other, budget_weighed=all(weighed))
        ratios = [pb[n].tok_s / pa[n].tok_s for n in names if pa[n].tok_s and pb[n].tok_s]  # type: ignore[operator]
        mixed = any(r >= 1 + floor for r in ratios) and any(r <= 1 - floor for r in ratios)
        p = formatting.num(v.comparison.p, 2) if v.comparison is not None and v.comparison.p is not None else "–"
        over = f"{len(names)} prompt(s)"
        if decode_flags:
            mark, head = trust.MARK, "not judged (a run flags its own figures)"
        elif mixed:
            mark, head = noise.UNKNOWN, "mixed: faster in some prompts, slower in others (no one call over them)"
        elif v.mark == noise.BETTER:
            mark, head = noise.BETTER, f"faster, beyond noise over {over} (rank test p={p} at level {v.level:g})"
        elif v.mark == noise.WORSE:
            mark, head = noise.WORSE, f"slower, beyond noise over {over} (rank test p={p} at level {v.level:g})"
        elif v.mark == noise.UNKNOWN:
            mark, head = noise.UNKNOWN, "can't tell: " + v.detail.removeprefix("can't tell: ")
        else:
            mark, head = noise.WITHIN, f"no change beyond noise over {over} (rank test p={p})"
        out.append(
            AnswerLine(
                "decode speed", f"{head}: decode tok/s " + ", ".join(parts), mark, "prompts.*.tok_s", decode_flags
            )
        )
    ca, cb = ra.concurrent, rb.concurrent
    if ca is not None and cb is not None and ca.combined_tok_s and cb.combined_tok_s:
        v = noise.samples_verdict(ca.runs, cb.runs, True, floor)
        mark = trust.MARK if flags else v.mark
        per = " / ".join(_rate(x) for x in cb.per_stream_tok_s)
        streams = cb.streams if "streams" in cb.model_fields_set else 2
        out.append(
            AnswerLine(
                "streams at once",
                f"{streams} streams at once: {_rate(ca.combined_tok_s)} → "
                f"{_rate(cb.combined_tok_s)} tok/s combined ({_pct(ca.combined_tok_s, cb.combined_tok_s)})"
                + (f"; each stream {per} tok/s" if per else ""),
                mark,
                "concurrent.combined_tok_s",
                flags,
            )
        )
    return out


def _score(run: LabelledRun) -> str:
    """`sure-correct/total` with the unsure grades and the interval beside it when there are any
    (`47/50 (2 unsure, [47, 49]/50)`, issue #55); a run written before `sure` existed: `correct/total` with its
    ambiguous grades (`49/50 (2 ambiguous)`)."""
    rec = run.record
    if not isinstance(rec, CapabilitySummary):
        return "–/–"
    t = rec.total
    if t.sure_correct is not None:
        unsure = f" ({formatting.num(t.unsure, 4)} unsure, {interval_text(t)})" if t.unsure else ""
        return f"{formatting.num(t.sure_correct, 4)}/{t.total}" + unsure
    n = t.ambiguous
    return f"{t.correct}/{t.total}" + (f" ({n} ambiguous)" if n else "")


def _answers(runs: list[LabelledRun], baseline: str, label: str) -> list[AnswerLine]:
    out = []
    bases = [r for r in runs if r.label == baseline and r.kind == "capability"]
    for base in bases:
        mode = base.capability().thinking
        other = next(
            (r for r in runs if r.label == label and r.kind == "capability" and r.capability().thinking == mode),
            None,
        )
        if other is None:
            continue
        score = f"{_score(base)} → {_score(other)}"
        why = comparability(base, other)
        flags: list[str] = []  # a slow client bends times, not grades
        if why:
            out.append(
                AnswerLine(
                    f"answers (thinking {mode})",
                    f"not comparable: {score} correct; " + "; ".join(why),
                    noise.UNKNOWN,
                    "total.correct",
                    flags,
                )
            )
            continue
        if not (base.graded() and other.graded()):
            out.append(
                AnswerLine(
                    f"answers (thinking {mode})",
                    f"{score} correct; "
                    + ("neither run has" if not (base.graded() or other.graded()) else "one run has no")
                    + " per-question grades (graded.jsonl) to pair, so no verdict",
                    noise.UNKNOWN,
                    "total.correct",
                )
            )
            continue
        changes = question_changes(base, other)
        lost = sum(c.change == "right_to_wrong" for c in changes)
        gained = len(changes) - lost
        p = mcnemar_exact_p(lost, gained)
        if lost + gained == 0 and not changes:
            mark = noise.WITHIN
        elif p < noise.ALPHA:
            mark = noise.BETTER if gained > lost else noise.WORSE
        else:
            mark = noise.WITHIN
        head = {noise.WORSE: "worse, beyond chance", noise.BETTER: "better, beyond chance"}.get(mark, "not worse")
        if mark == noise.WITHIN and lost > gained:
            head = "not worse beyond chance"
        unknown = cant_tell(base, other)
        style = style_change(question_scores(base.graded()), question_scores(other.graded()))
        out.append(
            AnswerLine(
                f"answers (thinking {mode})",
                f"{head}: {score} correct; {lost} question(s) went right→wrong, {gained} wrong→right"
                + (f", {unknown} can't tell (unsure in either run)" if unknown else "")
                + f" (McNemar's exact test p={formatting.num(p, 2)})"
                + (f"; {style}" if style else ""),
                mark,
                "total.correct",
                flags,
            )
        )
    return out


def _distribution(run: LabelledRun, key: str) -> Distribution | None:
    s = run.stress()
    return s.metric(key) if s is not None else None


def _metric(run: LabelledRun, key: str, stat: str) -> int | float | None:
    d = _distribution(run, key)
    return d.statistic(stat) if d is not None else None


def _verdict(run: LabelledRun, key: str) -> VerdictReading | None:
    s = run.stress()
    return VerdictReading.from_json(s.diagnosis(key)) if s is not None else None


def _effective_concurrency(run: LabelledRun) -> float | None:
    s = run.stress()
    return s.effective_concurrency_raw() if s is not None else None


def _verdict_word(v: VerdictReading | None) -> str:
    if v is None:
        return "not judged"
    return {"yes": "yes", "no": "no", CANT: "can't tell", NOT_EXERCISED: "not exercised"}.get(v.verdict, v.verdict)


def _stress_mark(base: LabelledRun, other: LabelledRun, metric: str) -> str:
    """The mark the stress table gives the metric (tables.stress_marks: the pair's figures one Holm family)."""
    from evalkit.report.tables import stress_marks

    s = base.stress()
    metrics = list(s.metrics) if s is not None else [metric]
    v = stress_marks(base, other, metrics if metric in metrics else [*metrics, metric]).get(metric)
    return v.mark if v is not None else noise.UNKNOWN


def _stress(base: LabelledRun, other: LabelledRun) -> list[AnswerLine]:
    flags = _flags(base, other)
    out = []
    a, b = _metric(base, "short_insert_ttft_s", "p95"), _metric(other, "short_insert_ttft_s", "p95")
    va, vb = _verdict(base, "head_of_line_blocking"), _verdict(other, "head_of_line_blocking")
    if a is not None or b is not None or va or vb:
        long_tokens = other.record.options_block().get("long_tokens")
        during = (
            f"a {long_tokens / 1000:g}K-token prefill"
            if isinstance(long_tokens, (int, float)) and long_tokens
            else "a long prefill"
        )
        mark = ""
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not flags:
            mark = _stress_mark(base, other, "short_insert_ttft_s")
        elif flags:
            mark = trust.MARK
        out.append(
            AnswerLine(
                "short request during a long prefill",
                f"waits out the long prefill (head-of-line blocking): {base.label} {_verdict_word(va)}, "
                f"{other.label} {_verdict_word(vb)}; its first token (p95) during {during}: "
                f"{formatting.seconds(a)} → {formatting.seconds(b)}",
                mark,
                "metrics.short_insert_ttft_s.p95",
                flags,
            )
        )
    a, b = _metric(base, "post_cancel_ttft_s", "max"), _metric(other, "post_cancel_ttft_s", "max")
    va, vb = _verdict(base, "cancel_aborts"), _verdict(other, "cancel_aborts")
    if a is not None or b is not None or va or vb:

        def stop(v: VerdictReading | None) -> str:
            w = _verdict_word(v)
            if v is not None and v.stop_after_cancel_s_max is not None:
                w += f" (stopped within {formatting.seconds(v.stop_after_cancel_s_max)})"
            return w

        out.append(
            AnswerLine(
                "cancel",
                f"a cancel stops the engine: {base.label} {stop(va)}, {other.label} {stop(vb)}; the next request's "
                f"first token (worst): {formatting.seconds(a)} → {formatting.seconds(b)}",
                trust.MARK if flags else "",
                "metrics.post_cancel_ttft_s.max",
                flags,
            )
        )
    ea, eb = _effective_concurrency(base), _effective_concurrency(other)
    if ea is not None and eb is not None:
        out.append(
            AnswerLine(
                "two generations at once",
                f"streams served at once: {ea:.2f} → {eb:.2f} (effective concurrency)",
                trust.MARK if flags else "",
                "diagnoses.effective_concurrency_raw",
                flags,
            )
        )
    return out


def _energy_per_token(run: LabelledRun) -> int | float | None:
    t = run.record.gpu_telemetry_part()
    return t.run.j_per_output_token if t is not None and t.run is not None else None


def _memory_energy(runs: list[LabelledRun], baseline: str, label: str) -> list[AnswerLine]:
    out = []
    for kind in ("bench", "stress", "capability"):
        a, b = _of(runs, baseline, kind), _of(runs, label, kind)
        if a is None or b is None:
            continue
        ja, jb = (_energy_per_token(x) for x in (a, b))
        if ja is not None and jb is not None:
            out.append(
                AnswerLine(
                    f"energy ({kind})",
                    f"energy per output token {formatting.num(ja)} → {formatting.num(jb)} J ({_pct(ja, jb)})",
                    key="gpu_telemetry.run.j_per_output_token",
                )
            )
        ma, mb = a.record.gpu_cards(), b.record.gpu_cards()
        peaks = [
            (g, ma[g].peak_mib, mb[g].peak_mib)
            for g in sorted(set(ma) & set(mb))
            if ma[g].peak_mib is not None and mb[g].peak_mib is not None
        ]
        if peaks:
            leak_verdict = b.record.gpu_verdict()
            verdict = leak_verdict.verdict if leak_verdict is not None else None
            leak = f"; memory over the run: {verdict.replace('_', ' ')}" if verdict else ""
            out.append(
                AnswerLine(
                    f"GPU memory ({kind})",
                    "peak "
                    + ", ".join(f"GPU {g} {formatting.num(x, 4)} → {formatting.num(y, 4)} MiB" for g, x, y in peaks)
                    + leak,
                    key="gpu_memory.*.peak_mib",
                )
            )
    return out


def answers(runs: list[LabelledRun], noise_floor: float = noise.DEFAULT_NOISE_FLOOR) -> list[BuildAnswer]:
    """One summary per candidate build (every label after the first) against the baseline."""
    labels = list(dict.fromkeys(r.label for r in runs))
    if len(labels) < 2:
        return []
    baseline = labels[0]
    out = []
    for label in labels[1:]:
        lines: list[AnswerLine] = []
        a, b = _of(runs, baseline, "bench"), _of(runs, label, "bench")
        if a and b:
            lines += _speed(a, b, noise_floor)
        lines += _answers(runs, baseline, label)
        a, b = _of(runs, baseline, "stress"), _of(runs, label, "stress")
        if a and b:
            lines += _stress(a, b)
        a, b = _of(runs, baseline, "load"), _of(runs, label, "load")
        if a and b:
            from evalkit.report.capacity import max_verdict

            mark, sentence = max_verdict(a, b)
            lines.append(AnswerLine("capacity", sentence, mark, "max_load_meeting_slo", _flags(a, b)))
        lines += _memory_energy(runs, baseline, label)
        out.append(BuildAnswer(label, baseline, lines))
    return out


def kinds_line(b: Build) -> str:
    """The run kinds of a build in words ("bench, capability, stress")."""
    return ", ".join(dict.fromkeys(b.kinds))


def time_bases(runs: list[LabelledRun]) -> list[str]:
    """One sentence per run kind that did not run in real time (a sped-up sim), naming the factor."""
    by_factor: dict[float, list[str]] = {}
    for r in runs:
        stress_manifest = r.run.manifest.get("stress")
        f = r.record.options_block().get("time_scale") or (
            stress_manifest.get("time_scale") if isinstance(stress_manifest, dict) else None
        )
        if isinstance(f, (int, float)) and f not in (1, 1.0):
            by_factor.setdefault(float(f), []).append(f"{r.label} {r.kind}")
    real = [f"{r.label} {r.kind}" for r in runs if not any(f"{r.label} {r.kind}" in v for v in by_factor.values())]
    out = [f"{', '.join(who)} ran {formatting.time_scale_words(f)}" for f, who in by_factor.items()]
    if out and real:
        out.append(f"{', '.join(real)} ran in real time")
    return out


def context(runs: list[LabelledRun], noise_floor: float = noise.DEFAULT_NOISE_FLOOR) -> AnswerContext:
    """The template's `answer`: builds, what differs, the per-build summaries, flagged runs and time bases."""
    bs = builds(runs)
    differ, same = differences(bs)
    return {
        "builds": bs,
        "differ": differ,
        "same": same,
        "answers": answers(runs, noise_floor),
        "flagged": [t for t in (trust.flag_text(r) for r in runs) if t],
        "time_bases": time_bases(runs),
    }
