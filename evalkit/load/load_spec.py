"""A background load named in one argument (`evalkit capability --under-load LOAD`).

LOAD is either `key=value,...` or a TOML file (`.toml`, the keys at the top level or under `[load]`), the keys
being `evalkit load`'s options with underscores: `concurrency` or `rate` (exactly one), `arrivals`
(constant|poisson|gamma), `burstiness`, `burst_size`, `stages` (a rate profile, repeated while the load runs),
`max_concurrency`, `max_prefill`, `prompt_tokens`, `output_tokens` (N or LO:HI), `prefix_tokens`, `token_scale`,
`reasoning_room`, `seed`, `warmup_s` (seconds of load before the graded questions start, default 1). A Mooncake
trace (evalkit/load/trace.py) is a load too: LOAD a `.jsonl` file, or `trace=FILE` with `speedup` and
`block_tokens`; it is replayed on its own timeline, end to end again for as long as the graded pass runs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evalkit.config.profiles import read_toml
from evalkit.errors import UsageError
from evalkit.load.arrivals import ARRIVALS, GapProcess, parse_stages
from evalkit.load.workload import Lengths, Workload

_INT = (
    "concurrency",
    "burst_size",
    "max_concurrency",
    "max_prefill",
    "prefix_tokens",
    "reasoning_room",
    "seed",
    "block_tokens",
)
_FLOAT = ("rate", "burstiness", "token_scale", "warmup_s", "speedup")
_TEXT = ("arrivals", "prompt_tokens", "output_tokens", "stages", "trace")
KEYS = (*_INT, *_FLOAT, *_TEXT)


@dataclass(frozen=True)
class LoadSpec:
    """What keeps the server busy: closed loop at `concurrency` streams or open loop at `rate`, and the mix."""

    concurrency: int | None = None
    rate: float | None = None
    arrivals: str = "constant"
    burstiness: float = 1.0
    burst_size: int = 1
    stages: str | None = None
    max_concurrency: int | None = None
    max_prefill: int | None = None
    prompt_tokens: str = "256"
    output_tokens: str = "64"
    prefix_tokens: int = 0
    token_scale: float = 1.0
    reasoning_room: int = 0
    seed: int = 42
    warmup_s: float = 1.0
    trace: str | None = None  # a Mooncake trace replayed on its timeline instead of synthetic arrivals
    speedup: float = 1.0
    block_tokens: int = 512
    source: str = ""

    @property
    def mode(self) -> str:
        """`concurrency`, `rate` or `trace`."""
        if self.trace is not None:
            return "trace"
        return "concurrency" if self.concurrency is not None else "rate"

    @property
    def load(self) -> float:
        """The streams or the rate (a stage profile's first rate; 0 for a trace, which sets its own)."""
        if self.trace is not None:
            return 0.0
        if self.concurrency is not None:
            return float(self.concurrency)
        return float(self.rate) if self.rate is not None else parse_stages(self.stages or "")[0].rate

    def workload(self) -> Workload:
        """The request mix."""
        return Workload(
            Lengths.parse(self.prompt_tokens, "prompt_tokens"),
            Lengths.parse(self.output_tokens, "output_tokens"),
            self.prefix_tokens,
            self.token_scale,
        )

    def gaps(self) -> GapProcess:
        """The open loop's gap process."""
        return GapProcess(self.arrivals, self.burstiness, self.burst_size)

    def to_json(self) -> dict[str, str | int | float | None]:
        """As the manifest and summary record it."""
        out: dict[str, str | int | float | None] = asdict(self)
        return out


def _convert(key: str, value: Any, where: str) -> Any:
    if key not in KEYS:
        raise UsageError(f"{where}: unknown key {key!r} (keys: {', '.join(KEYS)})")
    try:
        if key in _INT:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if key in _FLOAT:
            if isinstance(value, bool):
                raise ValueError
            v = float(value)
            if not math.isfinite(v):
                raise ValueError
            return v
    except (TypeError, ValueError):
        raise UsageError(f"{where}: {key} must be a {'whole ' if key in _INT else ''}number, not {value!r}") from None
    return str(value)


def parse_load_spec(text: str) -> LoadSpec:
    """`concurrency=4` / `rate=2,arrivals=poisson` or a TOML file; every mistake is a usage error naming it."""
    where = f"--under-load {text!r}"
    raw: dict[str, Any]
    path = Path(text)
    if text.endswith(".jsonl"):
        raw = {"trace": text}
    elif text.endswith(".toml"):
        if not path.is_file():
            raise UsageError(f"{where}: no such file")
        data = read_toml(path)
        raw = data.get("load", data) if isinstance(data.get("load", data), dict) else {}
        where = str(path)
    else:
        raw = {}
        for part in text.split(","):
            if not part.strip():
                continue
            k, eq, v = part.partition("=")
            if not eq:
                raise UsageError(f"{where}: {part.strip()!r} is not key=value")
            raw[k.strip()] = v.strip()
    values = {k: _convert(k, v, where) for k, v in raw.items()}
    spec = LoadSpec(**values, source=text)
    _check(spec, where)
    return spec


def _check(s: LoadSpec, where: str) -> None:
    given = [s.concurrency is not None, s.rate is not None or s.stages is not None, s.trace is not None]
    if sum(given) != 1:
        raise UsageError(f"{where}: give exactly one of concurrency, rate (or stages) or a trace")
    if s.trace is not None:
        if not Path(s.trace).is_file():
            raise UsageError(f"{where}: trace file {s.trace} not found")
        if s.speedup <= 0 or s.block_tokens < 1:
            raise UsageError(f"{where}: speedup must be positive and block_tokens at least 1")
    if s.concurrency is not None and s.concurrency < 1:
        raise UsageError(f"{where}: concurrency must be at least 1")
    if s.rate is not None and s.rate <= 0:
        raise UsageError(f"{where}: rate must be positive")
    if s.arrivals not in ARRIVALS:
        raise UsageError(f"{where}: arrivals must be one of {', '.join(ARRIVALS)}")
    if s.stages is not None:
        parse_stages(s.stages)
    s.gaps()  # checks burstiness and burst_size
    s.workload()  # checks the lengths
    for name in ("max_concurrency", "max_prefill"):
        v = getattr(s, name)
        if v is not None and v < 1:
            raise UsageError(f"{where}: {name} must be at least 1")
    if s.token_scale <= 0 or s.warmup_s < 0 or s.prefix_tokens < 0 or s.reasoning_room < 0:
        raise UsageError(f"{where}: token_scale must be positive; warmup_s, prefix_tokens, reasoning_room not negative")
