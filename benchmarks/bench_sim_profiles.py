"""The sim's write-up profiles, measured the way the write-up measured them (figures in model seconds).

For `dual-2080ti-before` and `dual-2080ti-after`: a 54K-token prompt's prefill time; the first-token time of short
requests inserted 0.5-3 s into that prefill (p95); the next request's first token after cancelling a long request
0.5 s into its prefill; single and two-stream decode rates. Real times are multiplied back by --time-scale.

    python benchmarks/bench_sim_profiles.py [--time-scale 20] [--inserts 12]
"""

from __future__ import annotations

import argparse
import asyncio

from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.sim.launch import start_sim
from evalkit.stats import percentile

LONG_TOKENS = 54000


def _long(code: str) -> list[dict]:
    text = f"The secret code is {code}. " + "lorem " * (LONG_TOKENS - 20)
    return [{"role": "user", "content": text + "What is the secret code? Reply with only the code."}]


def _short(i: int) -> list[dict]:
    return [{"role": "user", "content": f"What is {i} + 1? Reply with only the number."}]


async def _profile(base_url: str, scale: float, inserts: int) -> dict[str, float]:
    out: dict[str, float] = {}
    async with ChatClient(base_url, "evalkit-sim") as c:
        await asyncio.gather(*[c.chat(ChatRequest(_short(0), max_tokens=2)) for _ in range(3)])
        # Short requests inserted 0.5-3 s (model time) into a long prefill, spread evenly, one long prompt each.
        ttfts, prefills = [], []
        for k in range(inserts):
            offset = 0.5 + 2.5 * k / max(1, inserts - 1)
            long_task = asyncio.ensure_future(c.chat(ChatRequest(_long(f"C-{k}"), max_tokens=4)))
            await asyncio.sleep(offset / scale)
            rec = await c.chat(ChatRequest(_short(k), max_tokens=4))
            ttfts.append(rec.ttft_s * scale)
            long_rec = await long_task
            prefills.append(long_rec.ttft_s * scale)
        out["short_insert_ttft_p95_s"] = percentile(ttfts, 95)
        out["short_insert_ttft_max_s"] = max(ttfts)
        out["long_prefill_p95_s"] = percentile(prefills, 95)
        # Cancel a long request 0.5 s into its prefill, then send a short one at once.
        after_cancel = []
        for k in range(3):
            await c.chat(ChatRequest(_long(f"X-{k}"), max_tokens=4), cancel_after_s=0.5 / scale)
            rec = await c.chat(ChatRequest(_short(k), max_tokens=4))
            after_cancel.append(rec.ttft_s * scale)
            await asyncio.sleep(45 / scale)  # let a cancelled-but-running prefill finish before the next round
        out["after_cancel_ttft_max_s"] = max(after_cancel)
    return out


async def _decode_rates(base_url: str, scale: float) -> dict[str, float]:
    # Measured at a low time scale: the client must parse every chunk on time for its rate to be the sim's.
    gen = [{"role": "user", "content": "Write a long essay."}]
    async with ChatClient(base_url, "evalkit-sim") as c:
        await asyncio.gather(*[c.chat(ChatRequest(gen, max_tokens=2)) for _ in range(2)])
        one = await c.chat(ChatRequest(gen, max_tokens=256))
        two = await asyncio.gather(*[c.chat(ChatRequest(gen, max_tokens=256)) for _ in range(2)])
    both = [t for r in two for t in r.chunk_times]
    return {
        "single_tok_s": (one.decode_tok_s or 0) / scale,
        "two_at_once_combined_tok_s": (len(both) - 2) / (max(both) - min(both)) / scale,
    }


def main() -> None:
    """Run both profiles and print their figures side by side."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-scale", type=float, default=20.0)
    ap.add_argument("--inserts", type=int, default=12)
    args = ap.parse_args()
    results = {}
    for name in ("dual-2080ti-before", "dual-2080ti-after"):
        with start_sim(["--profile", name, "--time-scale", str(args.time_scale)]) as sim:
            results[name] = asyncio.run(_profile(sim.base_url, args.time_scale, args.inserts))
        with start_sim(["--profile", name, "--time-scale", "2"]) as sim:
            results[name].update(asyncio.run(_decode_rates(sim.base_url, 2.0)))
    before, after = results["dual-2080ti-before"], results["dual-2080ti-after"]
    print(f"sim profiles at time-scale {args.time_scale:g} (model seconds)")
    print(f"{'metric':<32}{'before':>12}{'after':>12}")
    for key in before:
        print(f"{key:<32}{before[key]:>12.3f}{after[key]:>12.3f}")
    ratio = before["short_insert_ttft_p95_s"] / after["short_insert_ttft_p95_s"]
    print(f"short-insert p95 ratio before/after: {ratio:.1f}")


if __name__ == "__main__":
    main()
