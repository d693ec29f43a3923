"""math-verify checks with a hard time limit that works from any thread.

math-verify's own timeout uses `signal.alarm`, which only works on a process's main thread. The checks therefore
run in one worker process (a `ProcessPoolExecutor` worker runs tasks on its main thread, so math-verify's own
alarms still work there) and the caller waits for each with a deadline; a check that overruns it has its worker
killed and replaced, and is judged `error` ("time limit"), never left hanging.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import signal
import threading
from typing import Any, TypedDict

CHECK_TIMEOUT_S = 20.0


class MathCheck(TypedDict, total=False):
    """What `MathJudge.check` says: `ok`, the gold and the answer as math-verify parsed them (`gold`, `pred`, None
    when nothing parsed) and `via` where an inequality was read as a set; or `error` alone on a time limit or crash."""

    ok: bool
    gold: str | None
    pred: str | None
    via: str
    error: str


def _verify(gold: str, answer: str, inner_timeout: int) -> MathCheck:
    # Runs in the worker process, on its main thread.
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    gold_p = parse(
        gold, extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()], parsing_timeout=inner_timeout
    )
    pred_p = parse(
        answer,
        extraction_config=[LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()],
        parsing_timeout=inner_timeout,
    )
    ok = bool(gold_p) and bool(pred_p) and verify(gold_p, pred_p, timeout_seconds=inner_timeout)
    out: MathCheck = {"ok": ok, "gold": str(gold_p[0]) if gold_p else None, "pred": str(pred_p[0]) if pred_p else None}
    if not ok and gold_p and pred_p:
        as_set = inequality_as_set(pred_p[0])
        if as_set is not None and verify(gold_p, [as_set], timeout_seconds=inner_timeout):
            out["ok"] = True
            out["via"] = f"inequality read as the set {as_set}"
    return out


def inequality_as_set(expr: Any) -> Any:
    """The set an inequality in one variable describes (`x > 2` is `(2, oo)`; several, comma- or "or"-joined, are
    their union, with `x != a` taken out), or None when `expr` is no such inequality."""
    import sympy
    from sympy.core.relational import Relational

    def one(e: Any) -> Any:
        if (
            isinstance(e, (Relational, sympy.And, sympy.Or))
            and len(e.free_symbols) == 1
            and not isinstance(e, sympy.Eq)
        ):
            return e.as_set()
        return None

    if isinstance(expr, (set, frozenset, sympy.FiniteSet)) and len(expr) > 1:
        parts = list(expr)
        ne = [p for p in parts if isinstance(p, sympy.Ne)]
        sets = [one(p) for p in parts if not isinstance(p, sympy.Ne)]
        if not sets or any(x is None for x in sets) or any(one(p) is None for p in ne):
            return None
        union = sympy.Union(*sets)
        return sympy.Intersection(union, *[one(p) for p in ne]) if ne else union
    return one(expr)


def ignore_ctrl_c() -> None:
    """In a worker process: a terminal's Ctrl-C reaches the whole process group; the parent alone answers it (one
    line, and it stops its workers), so a worker does not print its own KeyboardInterrupt traceback (issue #56)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class MathJudge:
    """A long-lived worker that answers `check(gold, answer)`; safe to call from several threads."""

    def __init__(self, timeout_s: float = CHECK_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._pool: cf.ProcessPoolExecutor | None = None

    def _ensure(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            # forkserver/spawn: forking a process that runs asyncio and threads is unsafe.
            self._pool = cf.ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=ignore_ctrl_c
            )
        return self._pool

    def check(self, gold: str, answer: str) -> MathCheck:
        """{"ok", "gold", "pred"} for a LaTeX gold and answer, or {"error": reason} on a time limit or crash."""
        with self._lock:
            pool = self._ensure()
            fut = pool.submit(_verify, gold, answer, max(1, int(self.timeout_s / 4)))
            try:
                checked: MathCheck = fut.result(timeout=self.timeout_s)
                return checked
            except cf.TimeoutError:
                self._kill()
                return {"error": f"math-verify time limit ({self.timeout_s:g} s)"}
            except Exception as e:  # noqa: BLE001 - a crash in the worker is one question's error
                self._kill()
                return {"error": f"math-verify failed: {type(e).__name__}: {e}"}

    def _kill(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the worker."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
