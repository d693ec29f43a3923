"""The measuring machine as evidence: a fixed calibration probe timed at the start and the end of every run, so two
runs made on a machine in different states (another job started, a laptop on battery, a busy CI runner) are never
compared as if only the server had changed.

The probe hashes in four 25 ms windows spread over about a quarter of a second and reads how much CPU the thread got
in each (its share of a core: near 1 on a quiet machine, lower when other work takes the cores) and how fast the core
hashed (its own speed: frequency, throttling), with the machine's load average per CPU (how much work was runnable:
the server's too, where it shares the machine, which the client's own share does not see while it has a core). A
run's state is its best share and its lowest load over its probes (start and end): a moment's contention at one end
(interpreters starting beside it) is not the machine's state, a machine with more work than cores shows at both ends,
and the client's own lateness covers the whole run. Two runs whose states differ past `CHANGED_SHARE` or
`CHANGED_LOAD`, or whose probes' work rates differ past `CHANGED_RATIO`, are "the measuring machine changed": a
comparison between them says "can't tell", never "beyond noise" (docs/until-sure.md)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping
from typing import Any, TypedDict

CHANGED_RATIO = 1.25  # work rates 25% apart: the CPU itself got slower or faster (frequency, throttling)
CHANGED_SHARE = 0.30  # best CPU shares 0.3 apart: the client got a different share of a core (more work than cores)
# lowest load averages per CPU 0.5 apart: half the machine's cores more work runnable in one run (on the lent machine,
# runs made 40 at a time on 16 cores read 0.9-1.5, runs made 10 at a time 0.1-0.4; identical runs made together
# never differed by 0.5)
CHANGED_LOAD = 0.5
_BLOCK = b"\x5a" * (64 * 1024)
_WALL_S = 0.1
_GAP_S = 0.05  # between windows: a burst of contention shorter than the probe's span leaves some window clear


class MachineProbe(TypedDict):
    """The manifest's `machine` (and `machine_end`, `machine_at_resume`) as `probe` writes it."""

    cpu_share: float
    rate: float | None
    loadavg_1m: float | None
    cpus: int | None


def probe(windows: int = 4, window_s: float = _WALL_S / 4, gap_s: float = _GAP_S) -> MachineProbe:
    """The probe as the manifest's `machine` records it: `cpu_share`, the CPU time the thread got over a window of
    hashing (the best of `windows`: a moment's contention, such as other programs starting, is not the machine's
    state; near 1 on a machine with a core to spare, lower when more work is runnable than there are cores),
    `rate`, hashes per CPU second (the core's own speed: frequency, a busy hyperthread sibling), the load average
    and the CPU count."""
    shares, n_all, cpu_all = [], 0, 0.0
    for i in range(windows):
        if i:
            time.sleep(gap_s)
        n = 0
        w0, c0 = time.perf_counter(), time.thread_time()
        while time.perf_counter() - w0 < window_s:
            hashlib.sha256(_BLOCK).digest()
            n += 1
        wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
        shares.append(min(1.0, cpu / wall) if wall > 0 else 0.0)
        n_all, cpu_all = n_all + n, cpu_all + cpu
    try:
        load: float | None = round(os.getloadavg()[0], 2)
    except OSError:  # no load average on this platform
        load = None
    return {
        "cpu_share": round(max(shares), 3),
        "rate": round(n_all / cpu_all, 1) if cpu_all > 0 else None,
        "loadavg_1m": load,
        "cpus": os.cpu_count(),
    }


def _probes(manifest: Mapping[str, Any], key: str) -> list[float]:
    out = []
    for part in ("machine", "machine_end"):
        m = manifest.get(part)
        if isinstance(m, Mapping) and isinstance(m.get(key), (int, float)) and m[key] > 0:
            out.append(float(m[key]))
    return out


def _loads(manifest: Mapping[str, Any]) -> list[float]:
    """The load average per CPU at each probe of a run that recorded both."""
    out = []
    for part in ("machine", "machine_end"):
        m = manifest.get(part)
        if isinstance(m, Mapping):
            load, cpus = m.get("loadavg_1m"), m.get("cpus")
            if isinstance(load, (int, float)) and isinstance(cpus, int) and cpus > 0 and load >= 0:
                out.append(float(load) / cpus)
    return out


def machine_changed(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """Why two runs' machines cannot be taken as the same (the client's best CPU share over each run's probes more
    than `CHANGED_SHARE` apart, their lowest load averages per CPU more than `CHANGED_LOAD` apart, or the core's work
    rate at the start or end of either run more than `CHANGED_RATIO` apart), or None when they can or a run has no
    probe to tell."""
    sa, sb = _probes(a, "cpu_share"), _probes(b, "cpu_share")
    if sa and sb and abs(max(sa) - max(sb)) > CHANGED_SHARE:
        return (
            f"the measuring machine changed: the client got {_span(sa)} of a core in one run and {_span(sb)} in the "
            f"other (calibration probe; more than {CHANGED_SHARE:.2f} apart)"
        )
    la, lb = _loads(a), _loads(b)
    if la and lb and abs(min(la) - min(lb)) > CHANGED_LOAD:
        return (
            f"the measuring machine changed: its load average was {_span(la)} per CPU in one run and {_span(lb)} in "
            f"the other (more than {CHANGED_LOAD:.1f} apart at the runs' least busy probes)"
        )
    ra, rb = _probes(a, "rate"), _probes(b, "rate")
    if ra and rb and max(ra + rb) / min(ra + rb) > CHANGED_RATIO:
        return (
            f"the measuring machine changed: its calibration probe ran at {_span(ra, 0)} hashes/s in one run and "
            f"{_span(rb, 0)} in the other (more than {CHANGED_RATIO - 1:.0%} apart)"
        )
    return None


def _span(xs: list[float], digits: int = 2) -> str:
    lo, hi = min(xs), max(xs)
    return f"{lo:.{digits}f}" if lo == hi else f"{lo:.{digits}f}-{hi:.{digits}f}"
