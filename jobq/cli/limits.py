"""The operator's commands over concurrency limits: `jobq limits` lists them with their
slots in use, `jobq limit TYPE --concurrency N` overrides one at run time (`--clear` goes
back to what the job class declares). `jobq jobs --blocked` and `jobq show` (cli/controls.py)
show what waits on them."""

from __future__ import annotations

import argparse
import json

from ..errors import CommandError
from ..limits import count_from_text
from ..queue import Queue
from .controls import print_table, type_name


def cmd_limits(queue: Queue, args: argparse.Namespace) -> int:
    rows = queue.limits()
    if args.json:
        shown = [
            {
                "type": row.type,
                "limit": row.name,
                "in_force": row.in_force,
                "declared": row.declared,
                "override": row.override,
                "in_use": row.in_use,
                "blocked": row.blocked,
            }
            for row in rows
        ]
        print(json.dumps(shown, indent=2))
        return 0
    if not rows:
        print("jobq: no job type has a concurrency limit")
        return 0
    header = ("type", "limit", "per key", "declared", "override", "slots in use", "blocked")
    print_table(
        header,
        [
            [
                r.type,
                r.name,
                *map(str, (r.in_force, r.declared, r.override or "")),
                *map(str, (r.in_use, r.blocked)),
            ]
            for r in rows
        ],
    )
    return 0


def concurrency(text: str) -> int:
    try:
        return count_from_text(text, "concurrency")
    except ValueError as error:
        raise CommandError(f"--concurrency: {error}") from None


def cmd_limit(queue: Queue, args: argparse.Namespace) -> int:
    name = type_name(args.type)
    if (args.concurrency is None) == (not args.clear):
        raise CommandError("give --concurrency N, or --clear to go back to the declared limit")
    count = None if args.clear else concurrency(args.concurrency)
    queue.set_limit(name, count)
    if count is None:
        print(f"jobq: type {name!r}: the declared concurrency limit applies again")
    else:
        print(f"jobq: type {name!r}: at most {count} attempts of one key at once")
    return 0


def add_limits(sub: argparse.ArgumentParser) -> None:
    """`jobq limit`'s own arguments. Not settings (options.py): an environment variable
    must never set a limit by accident."""
    sub.add_argument("type", metavar="TYPE", help="the job type")
    sub.add_argument(
        "--concurrency", metavar="N", help="at most N attempts of one key at once, on every node"
    )
    sub.add_argument("--clear", action="store_true", help="drop the override")
