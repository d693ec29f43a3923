"""Every stress verdict and attribution of a llama.cpp run, set against what the server's log alone says.

`python -m evalkit.realserver compare-log RUN_DIR...` reads a stress run directory whose `server_log.jsonl` holds a
llama-server log with its own timestamps, and prints one line per check: evalkit's figure, the log lines the check
reads (their stamps), and AGREE or DIFFER. The log-side facts come from llama.cpp's lines alone (tools/server:
`launch_slot_` "processing task", `print_timing` "prompt eval time" / "eval time", `release` "stop processing:
n_tokens", `stop: cancel task`), put on evalkit's clock by their stamps; the client's clock only says when a
request was sent. A request's own first token, by the log, is its release minus its `eval time`.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from evalkit.evidence.log_lines import LogLine
from evalkit.evidence.server_evidence import calibrate, read_evidence, server_stamp
from evalkit.evidence.wait_parts import HOUSEKEEPING, IDLE_SAVE, IN_SLOT_DECODE, IN_SLOT_PREFILL, UNATTRIBUTED, WORDS
from evalkit.runs.rundir import read_jsonl
from evalkit_stress.diagnose import diagnose
from evalkit_stress.verdicts import YES

_TASK = re.compile(r"id\s+(\d+)\s*\|\s*task\s+(\d+)\s*\|")
_PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL = re.compile(r"\|\s+eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_RELEASE = re.compile(r"stop processing: n_tokens = (\d+)")
_CANCEL = re.compile(r"cancel task, id_task = (\d+)")


@dataclass
class Task:
    """What the log says about one task (epoch times on evalkit's clock)."""

    task: int
    slot: int | None = None
    launched: float | None = None
    released: float | None = None
    n_tokens: int | None = None
    cancelled: float | None = None  # its `stop: cancel task` line
    prompt_ms: float | None = None
    prompt_n: int | None = None
    eval_ms: float | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def first_token(self) -> float | None:
        """Its first token by the log: the release less its generation time."""
        if self.released is None or self.eval_ms is None:
            return None
        return self.released - self.eval_ms / 1000


def read_tasks(rows: list[LogLine], offset: float) -> dict[int, Task]:
    """Every task the log names, from its own lines."""
    tasks: dict[int, Task] = {}
    for r in rows:
        line = r.get("line") or ""
        st = server_stamp(line)
        if st is not None and (mc := _CANCEL.search(line)) and not r.get("earlier"):
            tasks.setdefault(int(mc.group(1)), Task(int(mc.group(1)))).cancelled = st + offset
            continue
        m = _TASK.search(line)
        if st is None or m is None or r.get("earlier") or int(m.group(2)) < 0:
            continue
        t = tasks.setdefault(int(m.group(2)), Task(int(m.group(2))))
        at = st + offset
        t.slot = int(m.group(1))
        if "processing task" in line:
            t.launched = at
        elif mm := _PROMPT_EVAL.search(line):
            t.prompt_ms, t.prompt_n = float(mm.group(1)), int(mm.group(2))
        elif mm := _EVAL.search(line):
            t.eval_ms = float(mm.group(1))
        elif mm := _RELEASE.search(line):
            t.released, t.n_tokens = at, int(mm.group(1))
        t.lines.append(line.strip())
    return tasks


def _stamp(line: str) -> str:
    return line.split(" ", 1)[0]


def compare(run: Path) -> tuple[list[str], int, int]:
    """The comparison's lines for one run, and (checks, agreements)."""
    rows = cast(list[LogLine], read_jsonl(run / "server_log.jsonl"))
    clock = calibrate(rows)
    out = [f"== {run}"]
    if clock is None:
        return out + ["no llama.cpp timestamps in server_log.jsonl: nothing to compare"], 0, 0
    out.append(f"log clock: {clock.lines} stamped lines, on evalkit's clock within {clock.bound_s * 1000:.0f} ms")
    tasks = read_tasks(rows, clock.offset)
    summary = json.loads((run / "summary.json").read_text())
    lines = [r for r in read_jsonl(run / "requests.jsonl") if r.get("scenario") != "calibration"]
    # read as the JSON a run file holds (the typed records are evalkit_stress.verdict_json's)
    d: dict[str, Any] = dict(diagnose(summary["metrics"], lines, read_evidence(run)).to_json())
    split = {s["request_id"]: s for s in d["ttft_split"]}
    by_id = {r["request_id"]: r for r in lines}
    checks = agree = 0

    def check(ok: bool, text: str) -> None:
        nonlocal checks, agree
        checks += 1
        agree += ok
        out.append(f"{'AGREE ' if ok else 'DIFFER'} {text}")

    def task_of(rid: str) -> Task | None:
        s = split.get(rid)
        return tasks.get(s["task"]) if s and s.get("task") is not None else None

    out.append("-- each request: its task by the log (prompt eval time and release n_tokens must be its own)")
    for r in lines:
        t, tm = task_of(r["request_id"]), r.get("server_timings") or {}
        if t is None or not tm:
            continue
        own = (
            t.prompt_ms is not None
            and abs(t.prompt_ms - tm["prompt_ms"]) < 0.01
            and t.n_tokens is not None
            and abs(t.n_tokens - (tm.get("cache_n", 0) + tm["prompt_n"] + tm["predicted_n"] - 1)) <= 1
        )
        check(
            own,
            f"{r['request_id']}: task {t.task} slot {t.slot}, log prompt eval {t.prompt_ms} ms "
            f"(timings {tm['prompt_ms']:.3f}), release n_tokens {t.n_tokens}",
        )

    out.append(
        "-- head-of-line: blocked by the log = its first token (release - eval time) came with or after the "
        "long request's (within 10% of the prefill left)"
    )
    hol = d["head_of_line_blocking"]
    for x in hol["samples"]:
        r = by_id[x["request_id"]]
        long = next(
            (
                o
                for o in lines
                if o.get("scenario") == r["scenario"] and o.get("cycle") == r["cycle"] and o.get("role") == "long"
            ),
            None,
        )
        ts, tl = task_of(r["request_id"]), task_of(long["request_id"]) if long else None
        if ts is None or tl is None or ts.first_token is None or tl.first_token is None:
            out.append(f"  (no log task for {x['request_id']})")
            continue
        left = tl.first_token - r["t_sent"]
        blocked = ts.first_token >= tl.first_token - 0.1 * left
        parts = ", ".join(f"{WORDS.get(k, k)} {v:.2f} s" for k, v in (x["figures"].get("wait_parts_s") or {}).items())
        in_slot = ts.launched is not None and ts.launched < tl.first_token
        named_slot = any(k in (IN_SLOT_PREFILL, IN_SLOT_DECODE) for k in x["figures"].get("wait_parts_s") or {})
        check(
            (x["verdict"] == YES) == blocked and (not blocked or in_slot == named_slot or not in_slot),
            f"{x['request_id']}: evalkit {x['verdict']} ({parts}); log: task {ts.task} launched "
            f"{_fmt(ts.launched, r['t_sent'])} into slot {ts.slot}, first token {_fmt(ts.first_token, r['t_sent'])}"
            f", long task {tl.task} first token {_fmt(tl.first_token, r['t_sent'])} (s after sent)",
        )

    out.append(
        "-- cancel: aborted by the log = its release n_tokens below its prompt; the next request waited "
        "'in a launched slot' by the log = launched before the cancelled task's release"
    )
    for s in d["cancel_aborts"]["samples"]:
        c = by_id[s["request_id"]]
        # its task by the log alone: the first `stop: cancel task` line after the client's cancel
        tc = min(
            (t for t in tasks.values() if t.cancelled is not None and t.cancelled >= c["t_done"] - 0.05),
            key=lambda t: t.cancelled or 0.0,
            default=None,
        )
        prompt = c.get("planned_prompt_tokens") or c.get("prompt_tokens")
        if tc is None or tc.n_tokens is None or tc.released is None or not prompt:
            out.append(f"  (no log task for {s['request_id']})")
            continue
        # launched after the cancel and released at once: nothing prefilled (n_tokens is the slot's cached prompt)
        at_once = tc.launched is not None and tc.launched >= c["t_done"] and tc.released - tc.launched < 0.06
        aborted = at_once or tc.n_tokens < 0.98 * prompt
        check(
            (s["verdict"] == YES) == aborted,
            f"{s['request_id']}: evalkit {s['verdict']} ({s.get('granularity')}); log: task {tc.task} cancel line "
            f"{_fmt(tc.cancelled, c['t_done'])}, launched {_fmt(tc.launched, c['t_done'])}, released "
            f"{_fmt(tc.released, c['t_done'])} s after the cancel at n_tokens {tc.n_tokens} of {prompt}"
            + (" (launched and released at once: nothing prefilled)" if at_once else ""),
        )
        nxt = next(
            (
                o
                for o in lines
                if o.get("scenario") == "cancel_then_short"
                and o.get("cycle") == c["cycle"]
                and o.get("role") == "short"
            ),
            None,
        )
        tn = task_of(nxt["request_id"]) if nxt else None
        nd = s.get("next_delay") or {}
        if tn is not None and tn.launched is not None and tc.released is not None:
            assert nxt is not None  # tn is nxt's task
            in_slot = tn.launched < tc.released
            check(
                ("in a launched slot" in (nd.get("cause") or "")) == in_slot
                or ((nd.get("cause") or "").startswith("the server's prompt-cache") and not in_slot),
                f"  next {nxt['request_id']}: evalkit waited {nd.get('wait_s', 0):.3f} s for '{nd.get('cause')}'; "
                f"log: task {tn.task} launched {_fmt(tn.launched, tc.released)} s from the cancelled release "
                f"(slot {tn.slot}), its TTFT {nxt['ttft_s']:.3f} s",
            )

    out.append("-- pauses between a launch and its prefill: the log lines in the pause name it, or none do")
    for g in d["silent_gaps"]:
        r, t = by_id[g["request_id"]], task_of(g["request_id"])
        sp = split[g["request_id"]]
        inside = [
            ln
            for row in rows
            if (st := server_stamp(ln := row.get("line") or "")) is not None
            and not row.get("earlier")
            and sp["launched"] - 0.001 <= st + clock.offset <= sp["server_start"]
        ]
        inside = [ln for ln in inside if "processing task" not in ln and "selected slot" not in ln]
        idle = any("saving idle slot" in ln for ln in inside)
        cache = any("prompt cache" in ln for ln in inside)
        want = WORDS[IDLE_SAVE if idle else HOUSEKEEPING if cache else UNATTRIBUTED]
        check(
            g["cause"] == want,
            f"{g['request_id']}: evalkit {g['gap_s']:.2f} s '{g['cause']}'; log: "
            f"{len(inside)} line(s) in the pause after task {t.task if t else '?'}'s launch"
            + (f", e.g. {inside[0][:110]}" if inside else "")
            + f"; idle slots {g['idle_slots_at_launch']}",
        )
        del r

    out.append("-- long request hurt by inserts: the log's prompt eval times of the long tasks")
    alone = [task_of(r["request_id"]) for r in lines if r.get("scenario") == "long_alone" and r.get("role") == "long"]
    with_ins = [
        task_of(r["request_id"])
        for r in lines
        if r.get("scenario") in ("short_insert", "double_insert") and r.get("role") == "long"
    ]
    a = [t.prompt_ms for t in alone if t and t.prompt_ms]
    w = [t.prompt_ms for t in with_ins if t and t.prompt_ms]
    if a and w:
        ratio = sorted(w)[len(w) // 2] / sorted(a)[len(a) // 2]
        hurt = d["long_hurt_by_inserts"]
        check(
            (hurt["verdict"] == YES) == (ratio > 1.10),
            f"evalkit {hurt['verdict']} ({hurt.get('ratio_p50')}); log prompt eval ms alone {a}, with inserts {w}",
        )
    out.append(f"{agree} of {checks} checks agree with the server's log")
    return out, checks, agree


def _fmt(t: float | None, ref: float) -> str:
    return "-" if t is None else f"{t - ref:+.3f}"


def main(argv: list[str]) -> int:
    """Print the comparison of every run directory given; exit 1 when a check differs."""
    total = good = 0
    for arg in argv:
        text, n, ok = compare(Path(arg))
        print("\n".join(text))
        total, good = total + n, good + ok
    return 0 if good == total else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
