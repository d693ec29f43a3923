"""The common flags, read once where a command starts: the server profile, the `Target` and the run's `RunDirOptions`.

Below the CLI nothing reads an `argparse.Namespace`: the core takes what these functions build.
"""

from __future__ import annotations

import argparse

from evalkit.config.profiles import ServerProfile, resolve_profile
from evalkit.config.target import EvidenceOptions, Target
from evalkit.errors import UsageError
from evalkit.session.context import RunDirOptions


def resolve_from_args(args: argparse.Namespace) -> ServerProfile:
    """The server profile the common flags (`--server`, `--base-url`, ...) describe, with its API key read from the
    environment; done once per run, where the command starts (kept on the namespace as `args.resolved_profile`)."""
    resolved = getattr(args, "resolved_profile", None)
    if isinstance(resolved, ServerProfile):
        return resolved
    profile = resolve_profile(
        getattr(args, "config", None),
        getattr(args, "server", None),
        getattr(args, "base_url", None),
        getattr(args, "model", None),
        getattr(args, "api_key_env", None),
    )
    args.resolved_profile = profile
    return profile


def profile_from_args(args: argparse.Namespace) -> ServerProfile:
    """The run's server profile (resolved once, `resolve_from_args`); a named `--api-key-env` must be set."""
    profile = resolve_from_args(args)
    named = getattr(args, "api_key_env", None)
    if named is not None and profile.api_key is None:
        # The default OPENAI_API_KEY may be unset (most self-hosted servers want no key); a named one may not.
        raise UsageError(f"--api-key-env {named}: no such environment variable is set")
    return profile


def target_from_args(args: argparse.Namespace) -> Target:
    """The server, its evidence flags and the client's process count, as the command's flags give them."""
    return Target(
        profile=profile_from_args(args),
        evidence=EvidenceOptions(
            metrics=getattr(args, "metrics", True),
            metrics_interval=getattr(args, "metrics_interval", None),
            server_log=getattr(args, "server_log", None),
        ),
        client_procs=max(1, getattr(args, "client_procs", 1) or 1),
        timeout_s=getattr(args, "timeout_s", None),
    )


def run_options_from_args(args: argparse.Namespace) -> RunDirOptions:
    """Where the run directory goes, its name, whether to start over, and the build identity the user adds."""
    return RunDirOptions(
        out=getattr(args, "out", "results"),
        name=getattr(args, "name", None),
        fresh=bool(getattr(args, "fresh", False)),
        server_moved=bool(getattr(args, "server_moved", False)),
        build_label=getattr(args, "build_label", None),
        build_info=tuple(getattr(args, "build_info", None) or ()),
    )
