"""Command lines: `jobq` (migrate, work, stats, prune)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import logs
from .dsn import DEFAULT_DSN
from .errors import JobqError
from .loop import PlainWorker
from .queue import Queue
from .records import Status


def env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"JOBQ_{name}") or default


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def types_from_env() -> list[str]:
    return [name.strip() for name in (env("TYPE") or "").split(",") if name.strip()]


def add_job_options(parser: argparse.ArgumentParser) -> None:
    """Options every command that touches jobs shares, each with its environment variable."""
    parser.add_argument(
        "--dsn",
        default=env("DSN"),
        help=f"database DSN (env JOBQ_DSN; default {DEFAULT_DSN} in the working directory)",
    )
    parser.add_argument(
        "--app",
        default=env("APP"),
        metavar="MODULE",
        help="module to import first, so its Job classes are registered (env JOBQ_APP)",
    )
    parser.add_argument(
        "--type",
        dest="types",
        action="append",
        metavar="T",
        help="job type to work on, repeatable; none means all types "
        "(env JOBQ_TYPE, comma-separated)",
    )
    parser.add_argument(
        "--lease",
        type=positive,
        default=positive(env("LEASE", "600") or "600"),
        metavar="SECONDS",
        help="lease of each claim, in seconds (env JOBQ_LEASE; default 600)",
    )
    parser.add_argument("--log-level", default=env("LOG_LEVEL", "INFO"), help="default INFO")


def import_app(module: str | None) -> None:
    if not module:
        return
    # The working directory is where an application usually lives; python -m does the same.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        importlib.import_module(module)
    except ImportError as error:
        raise SystemExit(f"jobq: cannot import --app {module!r}: {error}") from error


def open_queue(args: argparse.Namespace) -> Queue:
    import_app(args.app)
    return Queue.connect(args.dsn, lease_duration=args.lease)


def cmd_migrate(args: argparse.Namespace) -> int:
    with open_queue(args) as queue:
        queue.install()
    print("jobq: schema is up to date")
    return 0


def cmd_work(args: argparse.Namespace) -> int:
    with open_queue(args) as queue:
        worker = PlainWorker(
            queue,
            args.types or types_from_env(),
            poll_interval=args.poll_interval,
            max_jobs=args.max_jobs,
        )
        worker.install_signal_handlers()
        worker.run()
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with open_queue(args) as queue:
        table = queue.counts_by_type()
    wanted = args.types or types_from_env()
    if wanted:
        table = {name: row for name, row in table.items() if name in wanted}
    if args.json:
        print(json.dumps(table, indent=2, sort_keys=True))
        return 0
    columns = [str(status) for status in Status]
    width = max([len("type"), *map(len, table)])
    print(f"{'type':<{width}}  " + "  ".join(f"{c:>11}" for c in columns))
    for name in sorted(table):
        print(f"{name:<{width}}  " + "  ".join(f"{table[name].get(c, 0):>11}" for c in columns))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    with open_queue(args) as queue:
        deleted = queue.prune(args.older_than)
    print(f"jobq: deleted {deleted} finished job(s)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobq", description="A job queue in your own database.")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, run: Callable[[argparse.Namespace], int], text: str) -> Any:
        sub = commands.add_parser(name, help=text, description=text)
        add_job_options(sub)
        sub.set_defaults(run=run)
        return sub

    command("migrate", cmd_migrate, "Create or upgrade jobq's tables.")
    work = command(
        "work",
        cmd_work,
        "Run jobs in this one process, without lease renewal: each job must finish within its "
        "lease. SIGTERM/SIGINT finish the current job, then exit.",
    )
    work.add_argument("--poll-interval", type=positive, default=1.0, metavar="SECONDS")
    work.add_argument("--max-jobs", type=int, default=None, help="exit after this many attempts")
    stats = command("stats", cmd_stats, "Count jobs by type and status.")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    prune = command("prune", cmd_prune, "Delete finished jobs older than --older-than.")
    prune.add_argument(
        "--older-than",
        type=positive,
        default=7 * 86400.0,
        metavar="SECONDS",
        help="age of finished jobs to delete (default 7 days)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(args.log_level)
    try:
        return int(args.run(args))
    except JobqError as error:
        print(f"jobq: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
