"""An `nvidia-smi` stand-in for tests on machines without GPUs: one or more cards, each growing in a set way.

`install(bindir, cards, events_url, requests_file)` writes an executable `nvidia-smi` into `bindir` (put it first
on PATH). Each call answers `--query-gpu=FIELDS --format=csv,noheader,nounits` for every card, in the order the
fields were asked. A card's used memory is

    base_mib + mib_per_call * calls so far + mib_per_second * seconds since the first call
             + mib_per_request * requests the server has finished + mib_per_cycle * stress cycles begun
             + a uniform draw in ±noise_mib

The finished requests are read from the sim's `/sim/events`, so a per-request leak follows the server's work as
the write-up's did (it allocated on every step), not the sampling rate; the cycles begun are the highest `cycle`
of the run's `requests.jsonl` (a cycle counts from its first finished request on); the noise is drawn from a
generator seeded by (seed, card, call), so a run's noise is the same sequence every time. nvidia-smi prints whole
MiB.
"""

from __future__ import annotations

import json
import stat
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

SCRIPT = r"""
import json, random, sys, time, urllib.request
from pathlib import Path

here = Path(__file__).resolve().parent
config = json.loads((here / "nvidia-smi.json").read_text())
state_file = here / "nvidia-smi.state"
now = time.time()
state = json.loads(state_file.read_text()) if state_file.exists() else {"calls": 0, "t0": now}
calls = state["calls"]
state_file.write_text(json.dumps({"calls": calls + 1, "t0": state["t0"]}))
elapsed = now - state["t0"]
done = 0
if config.get("events_url"):
    try:
        with urllib.request.urlopen(config["events_url"], timeout=5) as r:
            events = json.loads(r.read())
        events = events.get("events", events) if isinstance(events, dict) else events
        done = sum(1 for e in events if e.get("done"))
    except OSError:
        sys.exit(9)  # like a driver that cannot be reached: the sampler loses this sample
cycle = 0
if config.get("requests_file"):
    try:
        for line in Path(config["requests_file"]).read_text().splitlines():
            try:
                cycle = max(cycle, int(json.loads(line).get("cycle") or 0))
            except ValueError:
                pass  # a line being written
    except OSError:
        pass  # no request finished yet
fields = ["index", "memory.used", "memory.total", "name"]
for a in sys.argv[1:]:
    if a.startswith("--query-gpu="):
        fields = a.split("=", 1)[1].split(",")
for card in config["cards"]:
    noise = random.Random(f"{config['seed']}:{card['index']}:{calls}").uniform(-1, 1) * card["noise_mib"]
    used = int(card["base_mib"] + card["mib_per_call"] * calls + card["mib_per_second"] * elapsed
               + card["mib_per_request"] * done + card["mib_per_cycle"] * cycle + noise)
    values = {"index": card["index"], "memory.used": used, "memory.total": card["total_mib"], "name": card["name"],
              "memory.free": card["total_mib"] - used, "uuid": f"GPU-fake-{card['index']}"}
    print(", ".join(str(values.get(f, "[N/A]")) for f in fields))
"""


@dataclass(frozen=True)
class FakeCard:
    """One card: its index and name, memory at rest, how fast it grows and how noisy its readings are."""

    index: int
    base_mib: float = 1000.0
    mib_per_request: float = 0.0
    mib_per_call: float = 0.0
    mib_per_second: float = 0.0
    mib_per_cycle: float = 0.0
    noise_mib: float = 0.0
    total_mib: int = 22528
    name: str = "NVIDIA GeForce RTX 2080 Ti"


def install(
    bindir: Path, cards: list[FakeCard], events_url: str | None = None, requests_file: Path | None = None, seed: int = 0
) -> Path:
    """Write the stand-in and its configuration into `bindir`; calling it again reconfigures it (and resets calls
    and the clock of `mib_per_second`)."""
    bindir.mkdir(parents=True, exist_ok=True)
    (bindir / "nvidia-smi.json").write_text(
        json.dumps(
            {
                "cards": [asdict(c) for c in cards],
                "events_url": events_url,
                "requests_file": None if requests_file is None else str(requests_file),
                "seed": seed,
            }
        )
    )
    (bindir / "nvidia-smi.state").unlink(missing_ok=True)
    exe = bindir / "nvidia-smi"
    # -S: only the standard library is needed, and skipping site-packages halves its start-up on a busy machine.
    exe.write_text(f"#!{sys.executable} -S\n{SCRIPT}")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe
