"""Command lines: `jobq` (migrate, work, stats, prune)."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from . import logs
from .dsn import DEFAULT_DSN, default_dsn, redact
from .errors import ConfigurationError, JobqError
from .loop import PlainWorker
from .queue import Queue, check_type_name
from .records import Status
from .retry import MAX_DELAY

# The database drivers whose errors are reported as one clean line rather than a traceback.
DRIVERS = ("sqlite3", "psycopg", "pymysql")


def env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"JOBQ_{name}") or default


def seconds(text: str, *, zero_ok: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    low = "0" if zero_ok else "a positive number"
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok) or value > MAX_DELAY:
        raise argparse.ArgumentTypeError(
            f"must be {low} of seconds up to {MAX_DELAY:.0f}, got {text!r}"
        )
    return value


def positive(text: str) -> float:
    return seconds(text)


def not_negative(text: str) -> float:
    return seconds(text, zero_ok=True)


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def type_name(text: str) -> str:
    try:
        check_type_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def log_level(text: str) -> str:
    name = text.strip().upper()
    if name not in logging.getLevelNamesMapping():
        raise argparse.ArgumentTypeError(f"unknown log level {text!r}")
    return name


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
        type=type_name,
        metavar="T",
        help="job type to work on, repeatable; none means all types "
        "(env JOBQ_TYPE, comma-separated)",
    )
    # String defaults go through `type` too, so a bad JOBQ_LEASE is reported like a bad --lease.
    parser.add_argument(
        "--lease",
        type=positive,
        default=env("LEASE", "600"),
        metavar="SECONDS",
        help="lease of each claim, in seconds (env JOBQ_LEASE; default 600)",
    )
    parser.add_argument(
        "--log-level",
        type=log_level,
        default=env("LOG_LEVEL", "INFO"),
        help="DEBUG, INFO, WARNING or ERROR (env JOBQ_LOG_LEVEL; default INFO)",
    )


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


class CommandError(JobqError):
    """A failure already worded for the user, with any password taken out."""


def secrets_in(dsn: str) -> list[str]:
    """The password(s) a DSN carries, as written and percent-decoded, longest first."""
    found: set[str] = set()
    try:
        password = urlsplit(dsn).password
    except ValueError:
        password = None
    candidates = [password] if password else []
    candidates += re.findall(r"://[^/@:]*:([^@/]*)@", dsn)
    candidates += re.findall(r"(?i)password=([^&\s]*)", dsn)
    for candidate in candidates:
        for value in (candidate, unquote(candidate)):
            # libpq ends the password at its first "@" and reports the rest as a host name.
            found.update(part for part in (value, *value.split("@")) if part)
    return sorted(found, key=len, reverse=True)


def scrub(text: str, dsn: str) -> str:
    """Text safe to print: drivers sometimes quote the DSN, password and all. scrub(dsn, dsn)
    is the DSN itself, fit to show."""
    for secret in secrets_in(dsn):
        text = text.replace(secret, "***")
    return redact(text)


def is_driver_error(error: BaseException) -> bool:
    for name in DRIVERS:
        module = sys.modules.get(name)
        if module is not None and isinstance(error, module.Error):
            return True
    return False


def open_queue(args: argparse.Namespace) -> Queue:
    import_app(args.app)
    dsn = args.dsn or default_dsn()
    try:
        return Queue.connect(dsn, lease_duration=args.lease)
    except ConfigurationError:
        raise
    except Exception as error:
        # A refused connection, a bad port or host: one line, never a traceback, which could
        # quote the DSN with its password.
        if not (is_driver_error(error) or isinstance(error, ValueError)):
            raise
        raise CommandError(
            f"cannot connect to {scrub(dsn, dsn)}: {scrub(str(error).strip(), dsn)}"
        ) from None


def cmd_migrate(args: argparse.Namespace) -> int:
    with open_queue(args) as queue:
        queue.install()
    print("jobq: schema is up to date")
    return 0


def cmd_work(args: argparse.Namespace) -> int:
    with open_queue(args) as queue:
        worker = PlainWorker(
            queue,
            args.types,
            poll_interval=args.poll_interval,
            max_jobs=args.max_jobs,
        )
        worker.install_signal_handlers()
        worker.run()
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with open_queue(args) as queue:
        table = queue.counts_by_type()
    if args.types:
        table = {name: row for name, row in table.items() if name in args.types}
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
    work.add_argument(
        "--max-jobs", type=count, default=None, metavar="N", help="exit after this many attempts"
    )
    stats = command("stats", cmd_stats, "Count jobs by type and status.")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    prune = command("prune", cmd_prune, "Delete finished jobs older than --older-than.")
    prune.add_argument(
        "--older-than",
        type=not_negative,
        default=7 * 86400.0,
        metavar="SECONDS",
        help="age of finished jobs to delete (default 7 days)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.types:
        args.types = types_from_env()
        for name in args.types:
            try:
                check_type_name(name)
            except ValueError as error:
                parser.error(f"JOBQ_TYPE: {error}")
    logs.configure(args.log_level)
    try:
        return int(args.run(args))
    except CommandError as error:
        print(f"jobq: {error}", file=sys.stderr)
        return 1
    except JobqError as error:
        # Scrubbed again: redact() alone misses part of a password with an unencoded "@".
        print(f"jobq: {scrub(str(error), args.dsn or default_dsn())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # A second stop request, or Ctrl-C before the worker began: any running attempt has
        # already been recorded as failed.
        print("jobq: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if not is_driver_error(error):
            raise
        dsn = args.dsn or default_dsn()
        message = scrub(str(error).strip(), dsn)
        if re.search(r"jobq_jobs.*(does not exist|doesn't exist)|no such table", message):
            message += " (has `jobq migrate` been run on this database?)"
        print(f"jobq: database error on {scrub(dsn, dsn)}: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
