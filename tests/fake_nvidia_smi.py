"""An `nvidia-smi` stand-in for tests on machines without GPUs: one or more cards, each growing at a set rate.

`install(bindir, cards, events_url)` writes an executable `nvidia-smi` into `bindir` (put it first on PATH). Each
call answers `--query-gpu=FIELDS --format=csv,noheader,nounits` for every card, in the order the fields were
asked. A card's used memory is `base_mib + mib_per_call * calls so far + mib_per_request * requests the server
has finished`, the last read from the sim's `/sim/events`, so a leak follows the server's work as a real one does
(the write-up's leak allocated on every step), not the sampling rate. nvidia-smi prints whole MiB.
"""

from __future__ import annotations

import json
import stat
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

SCRIPT = r'''
import json, sys, urllib.request
from pathlib import Path

here = Path(__file__).resolve().parent
config = json.loads((here / "nvidia-smi.json").read_text())
counter = here / "nvidia-smi.calls"
calls = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(calls + 1))
done = 0
if config.get("events_url"):
    try:
        with urllib.request.urlopen(config["events_url"], timeout=5) as r:
            events = json.loads(r.read())
        events = events.get("events", events) if isinstance(events, dict) else events
        done = sum(1 for e in events if e.get("done"))
    except OSError:
        sys.exit(9)  # like a driver that cannot be reached: the sampler loses this sample
fields = ["index", "memory.used", "memory.total", "name"]
for a in sys.argv[1:]:
    if a.startswith("--query-gpu="):
        fields = a.split("=", 1)[1].split(",")
for card in config["cards"]:
    used = int(card["base_mib"] + card["mib_per_call"] * calls + card["mib_per_request"] * done)
    values = {"index": card["index"], "memory.used": used, "memory.total": card["total_mib"], "name": card["name"],
              "memory.free": card["total_mib"] - used, "uuid": f"GPU-fake-{card['index']}"}
    print(", ".join(str(values.get(f, "[N/A]")) for f in fields))
'''


@dataclass(frozen=True)
class FakeCard:
    """One card: its index and name, memory at rest, and how fast it grows (per call, per finished request)."""

    index: int
    base_mib: float = 1000.0
    mib_per_request: float = 0.0
    mib_per_call: float = 0.0
    total_mib: int = 22528
    name: str = "NVIDIA GeForce RTX 2080 Ti"


def install(bindir: Path, cards: list[FakeCard], events_url: str | None = None) -> Path:
    """Write the stand-in and its configuration into `bindir`; calling it again reconfigures it (and resets calls)."""
    bindir.mkdir(parents=True, exist_ok=True)
    (bindir / "nvidia-smi.json").write_text(json.dumps({"cards": [asdict(c) for c in cards],
                                                        "events_url": events_url}))
    (bindir / "nvidia-smi.calls").unlink(missing_ok=True)
    exe = bindir / "nvidia-smi"
    # -S: only the standard library is needed, and skipping site-packages halves its start-up on a busy machine.
    exe.write_text(f"#!{sys.executable} -S\n{SCRIPT}")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe
