"""What a soak run found, as it prints it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobq.testing.history import Report

from .faults import KINDS

if TYPE_CHECKING:
    from .soak import Soak


@dataclass
class Outcome:
    report: Report | None = None
    drained: bool = False
    problems: list[str] = field(default_factory=list)


def print_report(soak: Soak, outcome: Outcome) -> bool:
    """Print the run's figures and verdict; whether it passed."""
    report = outcome.report
    assert report is not None
    faults = ", ".join(f"{kind} {soak.faults[kind]}" for kind in KINDS)
    print()
    print(f"jobs: {report.jobs}")
    print(f"attempts: {report.attempts_run} run, {report.attempts_counted} counted by the database")
    print(f"killed mid-attempt: {len(report.unfinished)}")
    print(f"acknowledgements refused: {soak.refused_acks()}")
    print(f"final statuses: {dict(sorted(report.statuses.items()))}")
    print(f"faults injected: {sum(soak.faults.values())} ({faults})")
    print(f"overlaps: {len(report.overlaps)}")
    print(f"lost: {len(report.lost)}")
    for line in report.summary().splitlines():
        if line.startswith("  "):
            print(line)
    ok = report.ok and outcome.drained and not outcome.problems
    if not outcome.drained:
        print("FAILED: the run did not drain in its time")
    for problem in outcome.problems:
        print(f"FAILED: {problem}")
    print("OK" if ok else "FAILED")
    return ok
