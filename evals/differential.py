"""Differential testing of one program against the reference solution, evalplus-style, with the comparison made
here, outside the sandbox: the reference runs in a sandbox of its own (all inputs at once, timed), the candidate
in another (one input at a time), and each output that comes back as a plain value is checked against the
expected one before the next input is handed over.

The comparison is evalplus 0.3.1's `unsafe_execute` (exact match, `atol` for floats, the `find_zero` oracle) with
its HumanEval/32 defect fixed (evalplus issue #253: 0.3.1 never records a `find_zero` input as passed). Values
are plain builtins by construction, so `==` is the builtins' own: an object that lies about equality, a subclass
of `int` or `str`, a proxy never gets this far (it is not a plain value, and the input fails).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from evalkit_evals.isolation import Isolation
from evalkit_evals.sandbox import SandboxLimits, Worker

MIN_TIME_LIMIT_S = 1.0  # evalplus's DEFAULT_MIN_TIME_LIMIT
TIME_LIMIT_FACTOR = 4.0  # evalplus's DEFAULT_GT_TIME_LIMIT_FACTOR
IPC_SLACK_S = 0.5  # handing an input over and reading the output back, on a loaded machine
# The limit is CPU time (evalplus's is wall time): on a busy machine a correct program gets a fraction of a core. A
# program that sleeps or blocks is stopped on the wall clock at this many times its limit.
WALL_FACTOR = 8.0
TRANSFER_BYTES_S = 4e6  # and, for a large output (HumanEval/15 and /130 answer up to 12 MB), its encoding and transfer
# The trusted reference keeps 4 GB per process (its batch of every output can be large): 16 GB over nproc 4.
REFERENCE_LIMITS = SandboxLimits(cpu_s=3600, wall_s=600.0, memory_bytes=16 * 1024**3, output_bytes=2**31, load_s=30.0)
SPLITS = ("base", "plus")


class Problem(TypedDict):
    """One HumanEval+ task as evalplus gives it (`humanevalplus.load_problems`): the prompt, the reference solution,
    the entry point, the base and plus inputs (each one call's arguments) and the float tolerance."""

    task_id: str
    prompt: str
    entry_point: str
    canonical_solution: str
    test: str
    contract: str
    base_input: list[list[Any]]
    plus_input: list[list[Any]]
    atol: float


class _SplitCounts(TypedDict):
    status: str  # pass, fail, timeout
    passed: int
    total: int


class SplitResult(_SplitCounts, total=False):
    """How a program did on one split's inputs (`check_program`): on failure, the input and the error too."""

    failed_input: int
    error: str | None


def split_inputs(problem: Problem, split: str) -> list[list[Any]]:
    """One split's inputs (`base` or `plus`)."""
    return problem["base_input"] if split == "base" else problem["plus_input"]


@dataclass(frozen=True)
class Expected:
    """The reference's outputs and call times, per split."""

    outputs: dict[str, list[Any]]
    seconds: dict[str, list[float]]


class ReferenceFailed(RuntimeError):
    """The reference solution did not produce its outputs (a grader failure, not the candidate's)."""


def reference_outputs(problem: Problem, worker: Worker) -> Expected:
    """Run the canonical solution on every base and plus input in `worker` (a reference worker, see
    `reference_worker`); ReferenceFailed when it cannot."""
    outputs, seconds = {}, {}
    loaded = worker.load(
        problem["prompt"] + problem["canonical_solution"], problem["entry_point"], REFERENCE_LIMITS.load_s
    )
    if loaded.status != "ok":
        raise ReferenceFailed(f"reference solution: {loaded.status}: {loaded.error}")
    for split in SPLITS:
        reply = worker.call_batch(split_inputs(problem, split), REFERENCE_LIMITS.wall_s)
        if reply.status != "ok":
            raise ReferenceFailed(f"reference solution, {split} inputs: {reply.status}: {reply.error}")
        outputs[split], seconds[split] = reply.value, reply.seconds
    return Expected(outputs, seconds)


def reference_worker(isolation: Isolation) -> Worker:
    """A started sandbox for the trusted reference solutions, one task after another (no candidate ever runs in
    it); ReferenceFailed when it does not start."""
    worker = Worker(None, None, isolation, REFERENCE_LIMITS)
    err = worker.start()
    if err:
        raise ReferenceFailed(f"reference sandbox: {err}")
    return worker


def _poly(xs: list[float], x: float) -> float:
    return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def _is_floats(x: Any) -> bool:
    if type(x) is float:
        return True
    if type(x) in (list, tuple) and x:
        return all(type(i) is float for i in x)
    return False


def same(entry_point: str, inp: list[Any], out: Any, exp: Any, atol: float) -> bool:
    """Whether output `out` of the candidate on input `inp` passes against the reference's `exp`."""
    try:
        if entry_point == "find_zero":
            (xs,) = inp  # find_zero's one argument, the coefficients (another length: ValueError, so False)
            return abs(_poly(xs, out)) <= atol
        if out == exp:
            return True
        if atol == 0 and _is_floats(exp):
            atol = 1e-6
        if atol == 0 or type(out) is not type(exp):
            return False
        if type(exp) in (list, tuple) and len(out) != len(exp):
            return False
        return bool(np.allclose(out, exp, rtol=1e-07, atol=atol))
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        return False


def approx_bytes(value: Any) -> int:
    """A rough size of a value's encoding (from a sample of a long container), for the time its transfer takes."""
    t = type(value)
    if t is str or t is bytes:
        return len(value)
    if t is dict:
        value = list(value.items())
        t = list
    if t in (list, tuple, set, frozenset):
        items = list(value) if t in (set, frozenset) else value
        sample = items[:64]
        if not sample:
            return 2
        return 2 + len(items) * (1 + sum(approx_bytes(v) for v in sample) // len(sample))
    return 24


def _split(
    worker: Worker,
    problem: Problem,
    split: str,
    expected: Expected,
    deadline: float,
) -> SplitResult:
    inputs = split_inputs(problem, split)
    total = len(inputs)
    result: SplitResult = {"status": "pass", "passed": 0, "total": total}
    for i, inp in enumerate(inputs):
        limit = (
            max(MIN_TIME_LIMIT_S, TIME_LIMIT_FACTOR * expected.seconds[split][i])
            + IPC_SLACK_S
            + approx_bytes(expected.outputs[split][i]) / TRANSFER_BYTES_S
        )
        left = max(0.0, deadline - time.monotonic())
        reply = worker.call(inp, min(WALL_FACTOR * limit, left), cpu_s=min(limit, left))
        if reply.status == "timeout":
            why = reply.error if WALL_FACTOR * limit <= left else "the answer's wall-clock limit"
            return {**result, "status": "timeout", "failed_input": i, "error": why}
        if reply.status != "ok":
            return {**result, "status": "fail", "failed_input": i, "error": f"{reply.status}: {reply.error}"}
        if not same(problem["entry_point"], inp, reply.value, expected.outputs[split][i], problem["atol"]):
            return {**result, "status": "fail", "failed_input": i, "error": "wrong output"}
        result["passed"] += 1
    return result


def check_program(
    code: str, problem: Problem, expected: Expected, isolation: Isolation, limits: SandboxLimits
) -> dict[str, SplitResult]:
    """Per split (`base`, `plus`): `status` (pass, fail, timeout), `passed`, `total`, and on failure
    `failed_input` and `error`. One sandbox serves all inputs; a new one starts only after the last died."""
    deadline = time.monotonic() + limits.wall_s
    results: dict[str, SplitResult] = {}
    worker: Worker | None = None
    try:
        for split in SPLITS:
            if worker is None or not worker.alive:
                if worker is not None:
                    worker.close()
                worker = Worker(code, problem["entry_point"], isolation, limits)
                err = worker.start()
                if err:
                    for rest in SPLITS[SPLITS.index(split) :]:
                        total = len(split_inputs(problem, rest))
                        results[rest] = {"status": "fail", "passed": 0, "total": total, "error": err}
                    break
            results[split] = _split(worker, problem, split, expected, deadline)
    finally:
        if worker is not None:
            worker.close()
    return results
