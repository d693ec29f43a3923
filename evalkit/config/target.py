"""What a run measures and how: the server (its resolved profile) and what evidence of itself it is asked for.

A command builds one `Target` where it parses its flags (`evalkit.commands.target_flags`); below the CLI nothing reads
the flags themselves. The profile carries the base URL, the model, the API key (read once, never shown) and the
standing request body; `EvidenceOptions` say which of the server's own words the run captures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evalkit.config.profiles import ServerProfile


@dataclass(frozen=True)
class EvidenceOptions:
    """`--no-metrics`, `--metrics-interval S` and `--server-log FILE`."""

    metrics: bool = True
    metrics_interval: float | None = None  # None: the kind's default (stress samples every second, others not)
    server_log: Path | None = None


@dataclass(frozen=True)
class Target:
    """The server a run measures, and how its client and evidence capture talk to it."""

    profile: ServerProfile
    evidence: EvidenceOptions = field(default_factory=EvidenceOptions)
    client_procs: int = 1
    timeout_s: float | None = None  # the command's --timeout-s: the preflight's probes are held to it too
