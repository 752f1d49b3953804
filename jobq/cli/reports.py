"""What `jobq stats` and `jobq schedules` print: a table for people, or JSON for scripts."""

from __future__ import annotations

import argparse
import json

from ..queue import Queue
from ..queue.retention import Retention
from ..records import Status
from ..schedules.scheduler import State
from .terminal import escaped


def cmd_stats(queue: Queue, args: argparse.Namespace) -> int:
    table = queue.counts_by_type()
    if args.types:
        table = {name: row for name, row in table.items() if name in args.types}
    if args.json:
        print(json.dumps(table, indent=2, sort_keys=True))
        return 0
    columns = [str(status) for status in Status]
    names = {escaped(name): name for name in table}
    width = max([len("type"), *map(len, names)])
    print(f"{'type':<{width}}  " + "  ".join(f"{c:>11}" for c in columns))
    for shown, name in sorted(names.items()):
        counts = "  ".join(f"{table[name].get(c, 0):>11}" for c in columns)
        print(f"{shown:<{width}}  {counts}")
    kept = Retention(args.retain_completed, args.retain_failed)
    print(f"retention: {kept.describe()}; {oldest_finished(queue.oldest_finished())}")
    return 0


def oldest_finished(age: float | None) -> str:
    if age is None:
        return "no finished job is kept"
    return f"the oldest finished job ended {roughly(age)} ago"


def roughly(seconds: float) -> str:
    """An age in the largest unit it holds twice: 90s, 5m, 3h, 2d."""
    for suffix, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size:.0f}{suffix}"
    return f"{seconds:.0f}s"


def print_schedules(found: list[State], as_json: bool, app: str | None) -> int:
    rows = [
        {
            "name": state.name,
            "schedule": state.spec,
            "last_slot": None if state.last_slot is None else state.last_slot.isoformat(),
            "next_slot": None if state.next_slot is None else state.next_slot.isoformat(),
            "last_job_id": state.last_job_id,
            "type": state.type,
            # False: a schedule the database knows (a supervisor runs it), not --app.
            "declared_here": state.declared_here,
        }
        for state in found
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(
            f"jobq: --app {app!r} declares no schedules"
            if app
            else "jobq: no schedules are declared here: give --app, the module that declares them"
        )
        return 0
    columns = list(rows[0])
    table = [[("-" if row[c] is None else escaped(str(row[c]))) for c in columns] for row in rows]
    widths = [max(len(c), *(len(line[i]) for line in table)) for i, c in enumerate(columns)]
    for line in [columns, *table]:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
    return 0
