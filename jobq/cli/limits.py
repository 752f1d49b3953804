"""The operator's commands over concurrency and rate limits: `jobq limits` lists them with
their slots in use, `jobq limit TYPE --concurrency N` or `--rate N/SECONDS` overrides one at
run time (`--clear` goes back to what the job class declares). `jobq jobs --blocked` and
`jobq show` (cli/controls.py) show what waits on them."""

from __future__ import annotations

import argparse
import json

from ..errors import CommandError
from ..limits import count_from_text, rate_from_text
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
                "per": row.per,
                "in_use": row.in_use,
                "blocked": row.blocked,
            }
            for row in rows
        ]
        print(json.dumps(shown, indent=2))
        return 0
    if not rows:
        print("jobq: no job type has a concurrency or rate limit")
        return 0
    header = ("type", "limit", "per key", "declared", "override", "slots in use", "blocked")
    print_table(
        header,
        [
            [
                r.type,
                r.name,
                *(as_text(count, r.per) for count in (r.in_force, r.declared, r.override)),
                *map(str, (r.in_use, r.blocked)),
            ]
            for r in rows
        ],
    )
    return 0


def as_text(count: int | None, per: float | None) -> str:
    """A limit's count as the table shows it: N, or N/SECONDS for a rate."""
    if count is None:
        return ""
    return str(count) if per is None else f"{count}/{per:g}"


def concurrency(text: str) -> int:
    try:
        return count_from_text(text, "concurrency")
    except ValueError as error:
        raise CommandError(f"--concurrency: {error}") from None


def cmd_limit(queue: Queue, args: argparse.Namespace) -> int:
    name = type_name(args.type)
    given = [flag for flag in (args.concurrency, args.rate) if flag is not None]
    if len(given) + bool(args.clear) != 1:
        raise CommandError(
            "give --concurrency N, --rate N/SECONDS, or --clear to go back to the declared limits"
        )
    if args.clear:
        queue.set_limit(name, None)
        queue.set_rate(name, None)
        print(f"jobq: type {name!r}: the declared limits apply again")
    elif args.rate is not None:
        try:
            count, per = rate_from_text(args.rate)
        except ValueError as error:
            raise CommandError(f"--rate: {error}") from None
        queue.set_rate(name, (count, per))
        print(f"jobq: type {name!r}: at most {count} starts of one key in any {per:g} s")
    else:
        count = concurrency(args.concurrency)
        queue.set_limit(name, count)
        print(f"jobq: type {name!r}: at most {count} attempts of one key at once")
    return 0


def add_limits(sub: argparse.ArgumentParser) -> None:
    """`jobq limit`'s own arguments. Not settings (options.py): an environment variable
    must never set a limit by accident."""
    sub.add_argument("type", metavar="TYPE", help="the job type")
    sub.add_argument(
        "--concurrency", metavar="N", help="at most N attempts of one key at once, on every node"
    )
    sub.add_argument(
        "--rate",
        metavar="N/SECONDS",
        help="at most N starts of one key in any SECONDS, on every node",
    )
    sub.add_argument("--clear", action="store_true", help="drop the overrides")
