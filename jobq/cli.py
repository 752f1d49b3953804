"""Command lines: `jobq` (migrate, work, stats, prune) and `jobq-supervise`."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import logs
from .app import import_app
from .dsn import DEFAULT_DSN, default_dsn, scrub
from .errors import ConfigurationError, JobqError
from .loop import PlainWorker
from .queue import FINISHED, Queue, check_type_name
from .records import Status
from .retry import MAX_DELAY
from .supervisor.config import SupervisorConfig
from .supervisor.master import Master

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
        "--log-format",
        choices=logs.FORMATS,
        default=env("LOG_FORMAT", "plain"),
        help="plain text, or one JSON object per line (env JOBQ_LOG_FORMAT; default plain)",
    )
    parser.add_argument(
        "--log-level",
        type=log_level,
        default=env("LOG_LEVEL", "INFO"),
        help="DEBUG, INFO, WARNING or ERROR (env JOBQ_LOG_LEVEL; default INFO)",
    )


class CommandError(JobqError):
    """A failure already worded for the user, with any password taken out."""


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
        deleted = queue.prune(args.older_than, args.statuses)
    print(f"jobq: deleted {deleted} finished job(s)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    # Imported here, not at the top: only the demo's own workers (--app jobq.demo) should be
    # able to run its job class, not every `jobq work` on a production database.
    from .demo import run_demo

    return run_demo(args.scenario, args.dsn)


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
    prune.add_argument(
        "--status",
        dest="statuses",
        action="append",
        choices=[str(status) for status in FINISHED],
        metavar="S",
        help="delete finished jobs of this status, repeatable: completed, failed or expired "
        "(default all three)",
    )
    demo_text = (
        "Show, with real worker processes, what jobq-supervise's lease renewal changes: an 8 s "
        "job on a 6 s lease under two plain `jobq work` workers, then under jobq-supervise. "
        "Prints a timeline and checks; exits 1 if a check fails."
    )
    demo = commands.add_parser("demo", help="Run a demonstration scenario.", description=demo_text)
    demo.add_argument("scenario", choices=["lease"], help="what to show")
    demo.add_argument(
        "--dsn",
        default=env("DSN"),
        help="database DSN (env JOBQ_DSN; default a fresh SQLite file in a temporary directory, "
        "deleted afterwards)",
    )
    demo.set_defaults(run=cmd_demo)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse, take --type from JOBQ_TYPE when not given, and set up logging."""
    args = parser.parse_args(argv)
    if "types" in vars(args) and not args.types:
        args.types = types_from_env()
        for name in args.types:
            try:
                check_type_name(name)
            except ValueError as error:
                parser.error(f"JOBQ_TYPE: {error}")
    logs.configure(getattr(args, "log_level", "WARNING"), getattr(args, "log_format", "plain"))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(build_parser(), argv)
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


TIMING_RULE = """
timing rule, checked at start:
  renew_interval + 2 x renew_timeout + 1 s + kill_grace + safety_margin < lease
A renewal round runs every --renew-interval; one that fails or takes longer than
--renew-timeout is retried once after 1 s. A worker whose lease can no longer be renewed
in time gets SIGTERM, then SIGKILL --kill-grace later, and is dead --safety-margin before
its lease ends. Minimums: interval 1 s, timeout 1 s, grace 0 s, margin 1 s.

signals: TERM/INT drain (a second one stops at once), QUIT stops at once, HUP replaces
the workers one at a time with freshly imported code, TTIN/TTOU add or remove a worker.
"""


def env_option(
    parser: argparse.ArgumentParser,
    name: str,
    kind: Callable[[str], Any],
    default: object,
    text: str,
    metavar: str = "SECONDS",
) -> None:
    """--name, defaulting to $JOBQ_NAME, then `default`."""
    variable = "JOBQ_" + name.upper().replace("-", "_")
    parser.add_argument(
        f"--{name}",
        type=kind,
        default=os.environ.get(variable) or default,
        metavar=metavar,
        help=f"{text} (env {variable}; default {default})",
    )


def at_least_one(text: str) -> int:
    value = count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def supervise_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobq-supervise",
        description="Run a pool of worker processes whose leases this master renews, "
        "killing any worker whose lease cannot be renewed in time.",
        epilog=TIMING_RULE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_job_options(parser)
    env_option(parser, "workers", at_least_one, 4, "worker processes", "N")
    env_option(parser, "renew-interval", positive, 10.0, "seconds between renewal rounds")
    env_option(parser, "renew-timeout", positive, 5.0, "how long a renewal round may take")
    env_option(parser, "kill-grace", not_negative, 5.0, "from SIGTERM to SIGKILL of a worker")
    env_option(
        parser,
        "safety-margin",
        positive,
        5.0,
        "a fenced worker is dead this long before its lease ends",
    )
    env_option(parser, "job-timeout", positive, None, "stop and fail a job running longer")
    env_option(parser, "graceful-timeout", positive, 30.0, "how long a drain waits for jobs")
    env_option(
        parser,
        "max-jobs-per-child",
        at_least_one,
        None,
        "recycle a worker after this many jobs",
        "N",
    )
    env_option(
        parser,
        "max-memory-per-child",
        positive,
        None,
        "recycle a worker whose RSS passes this, between jobs",
        "MIB",
    )
    env_option(parser, "poll-interval", positive, 1.0, "longest wait between polls when idle")
    env_option(
        parser,
        "maintenance-interval",
        positive,
        10.0,
        "seconds between maintenance runs, which recover expired leases",
    )
    env_option(
        parser,
        "metrics-port",
        count,
        None,
        "serve /metrics, /healthz and /readyz on this port (0: any free one); off if not given",
        "PORT",
    )
    env_option(
        parser,
        "metrics-address",
        str,
        "127.0.0.1",
        "address to serve metrics on; give 0.0.0.0 explicitly to expose them",
        "ADDRESS",
    )
    env_option(
        parser,
        "termination-grace-period",
        positive,
        None,
        "the pod's terminationGracePeriodSeconds: refuse to start if a drain cannot fit in it",
    )
    parser.add_argument(
        "--listen-dsn",
        default=env("LISTEN_DSN"),
        help="PostgreSQL behind a transaction pooler (pool_mode=transaction in --dsn): a direct "
        "connection for wake-ups of idle workers, which otherwise poll (env JOBQ_LISTEN_DSN)",
    )
    return parser


def supervise_main(argv: Sequence[str] | None = None) -> int:
    args = parse(supervise_parser(), argv)
    dsn = args.dsn or default_dsn()
    config = SupervisorConfig(
        dsn=dsn,
        app=args.app,
        types=tuple(args.types),
        lease=args.lease,
        workers=args.workers,
        renew_interval=args.renew_interval,
        renew_timeout=args.renew_timeout,
        kill_grace=args.kill_grace,
        safety_margin=args.safety_margin,
        job_timeout=args.job_timeout,
        graceful_timeout=args.graceful_timeout,
        max_jobs_per_child=args.max_jobs_per_child,
        max_memory_per_child=args.max_memory_per_child,
        poll_interval=args.poll_interval,
        maintenance_interval=args.maintenance_interval,
        metrics_address=args.metrics_address,
        metrics_port=args.metrics_port,
        termination_grace_period=args.termination_grace_period,
        listen_dsn=args.listen_dsn,
    )
    try:
        return Master(config).run()
    except JobqError as error:
        print(f"jobq-supervise: {scrub(str(error), dsn)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
