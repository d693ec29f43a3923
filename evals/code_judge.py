"""What a run needs to judge model-written code: the isolation chosen once, the limits, and the reference
solutions' outputs, computed once per task in one reference sandbox kept for the run (repeats and replays reuse
them). Candidates never run in that sandbox: each gets its own (`differential.check_program`)."""

from __future__ import annotations

import threading

from evalkit_evals.differential import (
    Expected,
    Problem,
    SplitResult,
    check_program,
    reference_outputs,
    reference_worker,
)
from evalkit_evals.isolation import Isolation
from evalkit_evals.sandbox import SandboxLimits, Worker


class CodeJudge:
    """Runs programs against a task's reference outputs under one isolation."""

    def __init__(self, isolation: Isolation, limits: SandboxLimits = SandboxLimits()) -> None:
        self.isolation = isolation
        self.limits = limits
        self._expected: dict[str, Expected] = {}
        self._lock = threading.Lock()  # one reference worker, one task at a time
        self._reference: Worker | None = None

    def expected(self, problem: Problem) -> Expected:
        """The reference's outputs for this task (computed on first use, in the run's reference sandbox)."""
        tid = problem["task_id"]
        with self._lock:
            if tid not in self._expected:
                if self._reference is None or not self._reference.alive:
                    self._reference = reference_worker(self.isolation)
                self._expected[tid] = reference_outputs(problem, self._reference)
            return self._expected[tid]

    def close(self) -> None:
        """Stop the reference sandbox."""
        with self._lock:
            if self._reference is not None:
                self._reference.close()
                self._reference = None

    def run(self, code: str, problem: Problem) -> dict[str, SplitResult]:
        """Per split, how the program did (see `differential.check_program`)."""
        return check_program(code, problem, self.expected(problem), self.isolation, self.limits)
