"""The measuring machine's probe (evalkit.runs.machine_probe): what it records, and when two runs' machines differ."""

from __future__ import annotations

from typing import Any

from evalkit.runs.machine_probe import machine_changed, probe


def _run(*shares: float, rate: float = 27000.0) -> dict[str, Any]:
    parts = ("machine", "machine_end")
    return {p: {"cpu_share": s, "rate": rate} for p, s in zip(parts, shares)}


def test_the_probe_records_a_share_of_a_core_and_a_work_rate() -> None:
    got = probe()
    assert 0 < got["cpu_share"] <= 1 and got["rate"] > 0 and got["cpus"] >= 1


def test_a_moments_dip_at_one_end_of_a_run_is_not_a_changed_machine() -> None:
    # measured on the lent machine (benchmarks/results/calibration-2026-12-07.txt): 4 of 70 runs made 10 at a time on
    # 16 cores read 0.52-0.57 at their start and 1.0 at their end, beside runs reading 1.0 at both
    assert machine_changed(_run(0.52, 1.0), _run(1.0, 1.0)) is None
    assert machine_changed(_run(1.0), _run(0.95, 0.99)) is None


def test_a_run_short_of_a_core_at_both_ends_is_a_changed_machine() -> None:
    why = machine_changed(_run(0.41, 0.45), _run(0.99, 1.0))
    assert why is not None and "0.41-0.45 of a core in one run and 0.99-1.00" in why
    # the core itself slower (frequency, throttling): the work rate 25% apart at either end of either run
    why = machine_changed(_run(1.0, 1.0, rate=20000.0), _run(1.0, 1.0, rate=27000.0))
    assert why is not None and "hashes/s" in why


def test_a_run_without_probes_cannot_tell() -> None:
    assert machine_changed({}, _run(0.4, 0.4)) is None


def test_a_machine_busier_by_half_its_cores_is_a_changed_machine() -> None:
    # the client kept its core (share 1.0 both) but the machine had 8 more runnable tasks on its 16 CPUs: the server,
    # where it shares the machine, did not (measured: runs made 40 at a time against runs made 10 at a time)
    def run(*loads: float) -> dict[str, Any]:
        parts = ("machine", "machine_end")
        return {p: {"cpu_share": 1.0, "rate": 27000.0, "loadavg_1m": x, "cpus": 16} for p, x in zip(parts, loads)}

    why = machine_changed(run(16.0, 20.0), run(2.0, 4.0))
    assert why is not None and "load average was 1.00-1.25 per CPU in one run and 0.12-0.25" in why
    # a run that was busy only at one end, or loads closer than half the cores: the same machine
    assert machine_changed(run(1.0, 16.0), run(2.0, 3.0)) is None
    assert machine_changed(run(6.0, 8.0), run(2.0, 3.0)) is None
