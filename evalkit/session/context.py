"""The open run a session measures in: the client connected to the target, the run directory created or resumed,
the server's evidence started (`open_run`); `evalkit.session.measurement` drives it from start to finish."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from evalkit.client.chat import ChatClient
from evalkit.clock import Clock
from evalkit.config.profiles import ServerProfile, manifest_fields
from evalkit.config.target import Target
from evalkit.evidence.capture import EvidenceCapture, evidence_capture
from evalkit.evidence.server_identity import apply_build_args, identify
from evalkit.redact import scrub_tree
from evalkit.runs import machine_probe
from evalkit.runs.json_value import JsonValue
from evalkit.runs.run_identity import run_defines
from evalkit.runs.rundir import RunDir, default_run_name
from evalkit.session.connect import open_client


@dataclass
class RunContext:
    """The open run: its directory, a connected client, the resolved server profile and the run's clock."""

    rundir: RunDir
    client: ChatClient
    profile: ServerProfile
    clock: Clock
    evidence: EvidenceCapture  # the server's /metrics and log; a measurement calls `end()` before its summary


@dataclass(frozen=True)
class RunDirOptions:
    """Where a run directory goes and what it is called (`--out`, `--name`), whether an existing one is started over
    (`--fresh`) or resumed from another URL (`--server-moved`), and the build identity the user adds to its manifest
    (`--build-label`, `--build-info KEY=VALUE`)."""

    out: Path | str = "results"
    name: str | None = None
    fresh: bool = False
    server_moved: bool = False
    build_label: str | None = None
    build_info: tuple[str, ...] = ()


@asynccontextmanager
async def open_run(
    target: Target,
    run: RunDirOptions,
    kind: str,
    manifest: dict[str, JsonValue],
    options: dict[str, JsonValue],
    scope: dict[str, JsonValue] | None = None,
) -> AsyncIterator[RunContext]:
    """Connect to the server (exit 2 when unreachable), create or resume `OUT/NAME`, close the client at the end.

    `options` are the flags that define the measurement (with the server's URL, model and identity, they must
    match for a resume: `runs.run_identity`); a complete run of the same definition and `scope` (what is asked)
    raises `RunFinished`. `evalkit.session.measurement`
    writes `summary.json`, calls `rundir.finish()` and prints the run directory's path as the last line of standard
    output (`print_run_path`, also a replay's).
    """
    clock = Clock()
    procs = target.client_procs
    client, profile = await open_client(target.profile, clock, client_procs=procs, timeout_s=target.timeout_s)
    try:
        name = run.name or default_run_name(kind)
        fields = apply_build_args(manifest_fields(profile), run.build_label, run.build_info)
        client_fields = {"client_procs": procs} if procs > 1 else {}
        key = profile.api_key
        identity = getattr(client, "identity", None) or await identify(
            profile.base_url or "", {"Authorization": f"Bearer {key}"} if key else None
        )
        identity = scrub_tree(identity, (key,))  # what the server says about itself (/props) may echo headers
        rundir = RunDir.create(
            run.out,
            name,
            kind,
            {**fields, **client_fields, **manifest},
            secrets=(key,),
            defines=run_defines(profile.base_url, profile.model, identity, options),
            fresh=run.fresh,
            server_moved=run.server_moved,
            scope=scope,
        )
        if client.preflight is not None:  # what the preflight found, and how the client talks to this server
            rundir.write_json("check.json", scrub_tree(client.preflight.to_json(), (key,)))
            support = client.preflight.fields
            rundir.update_manifest(
                **{
                    "field_support_at_resume" if rundir.resumed else "field_support": scrub_tree(
                        {
                            **(support.to_json() if support is not None else {}),
                            "not_sent": sorted(client.preflight.omit_fields),
                        },
                        (key,),
                    )
                }
            )
            if client.preflight.omit_fields:
                print(
                    f"note: the server refuses {', '.join(sorted(client.preflight.omit_fields))}: evalkit does not "
                    "send them (manifest.json field_support)",
                    file=sys.stderr,
                    flush=True,
                )
        # A resumed run keeps the identity it started with; the one seen at the resume is kept beside it.
        rundir.update_manifest(**{"server_identity_at_resume" if rundir.resumed else "server_identity": identity})
        rundir.update_manifest(**{"machine_at_resume" if rundir.resumed else "machine": machine_probe.probe()})
        evidence = evidence_capture(target.evidence, kind, rundir, profile, key, clock)
        await evidence.start()
        try:
            yield RunContext(rundir=rundir, client=client, profile=profile, clock=clock, evidence=evidence)
        finally:
            await evidence.close()
    finally:
        await client.aclose()


def print_run_path(rundir: RunDir) -> None:
    """The contract's last line of standard output: the run directory's path."""
    print(rundir.path, flush=True)
