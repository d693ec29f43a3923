"""A request's `requests.jsonl` line, A/B in one run: `RequestRecord.to_json` (a shallow field dict dumped through
the `RequestLine` model, evalkit/runs/records.py) against the `dataclasses.asdict` deep copy it replaced (#41 step
8). Both make the same JSON; load and stress build one line per request on the event loop that also stamps sends.
CPU (process time) per line, for answers of 64 and 512 tokens with their chunk times kept (load's lines).

    python benchmarks/bench_request_line.py [--lines 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict
from typing import Any

from evalkit.runs.records import RequestRecord


def _record(tokens: int) -> RequestRecord:
    rec = RequestRecord(request_id="load-1", t_sent=1.0, tags={"phase": "measured", "point": 0, "user": 3})
    rec.chunk_times += [1.5 + i * 0.001 for i in range(tokens)]
    rec.t_first_token, rec.t_done, rec.completion_tokens = 1.5, 1.5 + tokens * 0.001, tokens
    rec.server_timings = {"prompt_n": 256, "predicted_n": tokens}
    return rec


def _asdict_line(rec: RequestRecord) -> dict[str, Any]:
    """The line as it was built before: a deep copy, derived figures, labels flattened."""
    d = asdict(rec)
    d["ttft_s"], d["ttft_answer_s"] = rec.ttft_s, rec.ttft_answer_s
    d["decode_tok_s"], d["request_tok_s"] = rec.decode_tok_s, rec.request_tok_s
    d["t_last_token"] = rec.chunk_times[-1] if rec.chunk_times else None
    tags = d.pop("tags")
    d.update({k: v for k, v in tags.items() if k not in d})
    return d


def _per_line_us(make: Any, rec: RequestRecord, lines: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(lines):
            make(rec)
        times.append((time.process_time() - t0) / lines * 1e6)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    for tokens in (64, 512):
        rec = _record(tokens)
        new = rec.to_json(with_chunk_times=True)
        assert json.dumps(new) == json.dumps(_asdict_line(rec)), "the two lines differ"
        model = _per_line_us(lambda r: r.to_json(with_chunk_times=True), rec, a.lines, a.repeat)
        deep = _per_line_us(_asdict_line, rec, a.lines, a.repeat)
        print(f"{tokens:4d} tokens: RequestLine dump {model:7.1f} us/line, asdict deep copy {deep:7.1f} us/line")


if __name__ == "__main__":
    main()
