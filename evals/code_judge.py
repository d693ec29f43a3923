"""What a run needs to judge model-written code: the isolation chosen once, the limits, and the reference
solutions' outputs, computed once per task and kept for the run (repeats and replays reuse them)."""

from __future__ import annotations

import threading
from typing import Any

from evalkit_evals.differential import Expected, check_program, reference_outputs
from evalkit_evals.isolation import Isolation
from evalkit_evals.sandbox import SandboxLimits


class CodeJudge:
    """Runs programs against a task's reference outputs under one isolation."""

    def __init__(self, isolation: Isolation, limits: SandboxLimits = SandboxLimits()) -> None:
        self.isolation = isolation
        self.limits = limits
        self._expected: dict[str, Expected] = {}
        self._lock = threading.Lock()
        self._task_locks: dict[str, threading.Lock] = {}

    def expected(self, problem: dict[str, Any]) -> Expected:
        """The reference's outputs for this task (computed on first use)."""
        tid = problem["task_id"]
        with self._lock:
            lock = self._task_locks.setdefault(tid, threading.Lock())
        with lock:
            if tid not in self._expected:
                self._expected[tid] = reference_outputs(problem, self.isolation)
            return self._expected[tid]

    def run(self, code: str, problem: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Per split, how the program did (see `differential.check_program`)."""
        return check_program(code, problem, self.expected(problem), self.isolation, self.limits)
