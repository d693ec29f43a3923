"""The report's sections, one per run kind, in the order the report shows them: a kind's heading and the function
that builds its section from that kind's runs. A new kind's section is one entry in `SECTIONS`; a kind with no entry
(`check`) has no section."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evalkit.report import capability as capability_report
from evalkit.report import capacity, stress_diagnoses, tables
from evalkit.report.context import SectionContext
from evalkit.report.runs import LabelledRun
from evalkit.report.tables import Table


@dataclass(frozen=True)
class Section:
    """One kind's section: its heading, and its tables (or a whole section) from that kind's runs."""

    kind: str
    heading: str
    tables: Callable[[list[LabelledRun], float], list[Table]] | None = None
    # A section with more than tables (load's verdicts): built whole from the runs and the heading.
    whole: Callable[[list[LabelledRun], str], SectionContext] | None = None

    def build(self, runs: list[LabelledRun], noise_floor: float) -> SectionContext:
        """The section's template context."""
        if self.whole is not None:
            return self.whole(runs, self.heading)
        assert self.tables is not None
        return {"kind": self.kind, "heading": self.heading, "tables": self.tables(runs, noise_floor)}


def _stress_tables(runs: list[LabelledRun], noise_floor: float) -> list[Table]:
    return [tables.stress_table(runs, noise_floor), *stress_diagnoses.diagnosis_tables(runs)]


SECTIONS: tuple[Section, ...] = (
    Section("bench", "Throughput (bench)", tables=tables.bench_tables),
    Section("capability", "Capability", tables=lambda runs, _floor: capability_report.capability_tables(runs)),
    Section("stress", "Latency under load (stress)", tables=_stress_tables),
    Section("load", "Capacity (load)", whole=capacity.capacity_section),
)


def sections(by_kind: dict[str, list[LabelledRun]], noise_floor: float) -> list[SectionContext]:
    """The sections of the kinds present, in the report's order."""
    return [s.build(by_kind[s.kind], noise_floor) for s in SECTIONS if s.kind in by_kind]
