"""The Queues page's rows: per job type, whether it is paused, its jobs waiting and running,
its endings and error rate over the last hour, its limits with their overrides, and the
schedules that enqueue it. Every figure is one the overview already reads from indexes."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..backends.limits import LimitRow
from ..queue import Queue
from ..schedules.scheduler import State

# The window of a type's endings and error rate, in minutes: the overview's table's.
WINDOW = 60


@dataclass
class TypeRow:
    name: str
    paused: bool
    counts: dict[str, int]
    concurrency: LimitRow | None = None
    rate: LimitRow | None = None
    schedules: list[State] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.counts.get("failed", 0) + self.counts.get("expired", 0)

    @property
    def ended(self) -> int:
        return self.counts.get("completed", 0) + self.failed

    @property
    def error_rate(self) -> float | None:
        """The share of the window's endings that failed or expired; None for none."""
        return self.failed / self.ended if self.ended else None


def type_rows(queue: Queue) -> list[TypeRow]:
    """Every type with a job now or ending in the window, a limit, a schedule, or a pause."""
    counts = queue.recent_counts_by_type(WINDOW)
    paused = queue.paused()
    limits = queue.limits()
    schedules = queue.schedule_states(stored=True)
    names = set(counts) | paused | {row.type for row in limits}
    names |= {state.type for state in schedules if state.type}
    rows = {name: TypeRow(name, name in paused, counts.get(name, {})) for name in names}
    for limit in limits:
        if limit.per is None:
            rows[limit.type].concurrency = limit
        else:
            rows[limit.type].rate = limit
    for state in schedules:
        if state.type:
            rows[state.type].schedules.append(state)
    return sorted(rows.values(), key=lambda row: row.name)
