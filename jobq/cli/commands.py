"""The `jobq` command line: migrate, work, stats, prune, web, demo and the operator's commands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .. import hooks, logs, options
from ..app import import_app, load_app, start_worker
from ..backends.naming import name_process, of_this_host
from ..dsn import default_dsn, scrub
from ..errors import CommandError, ConfigurationError, JobqError, NoSchema
from ..options import Option
from ..queue import Queue, schema
from ..queue.maintenance import FINISHED
from ..schedules import REGISTERED
from ..worker.plain import PlainWorker
from . import controls as cli_controls
from . import limits as cli_limits
from . import nodes as cli_nodes
from . import reports
from .closed_stdout import quiet_on_closed_stdout
from .title import hide_secrets

# The database drivers whose errors are reported as one clean line rather than a traceback.
DRIVERS = ("sqlite3", "psycopg", "pymysql")


# Options of the `jobq` commands beside the supervisor's own declarations.
OUTPUT = (options.LOG_LEVEL, options.LOG_FORMAT)
STATUSES = Option(
    "statuses",
    [str(status) for status in FINISHED],
    "which finished jobs to delete, repeatable",
    unit="choice",
    choices=tuple(str(status) for status in FINISHED),
    repeatable=True,
    called="status",
    metavar="S",
    shown_default="all of them",
)
MAX_JOBS = Option("max_jobs", None, "exit after this many attempts", unit="count")
OLDER_THAN = Option(
    "older_than",
    7 * 86400.0,
    "age of the finished jobs to delete",
    minimum=0.0,
    shown_default="604800 (7 days)",
)


class Parser(argparse.ArgumentParser):
    """Usage errors in one line that says where to look, not the whole usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def is_driver_error(error: BaseException) -> bool:
    for name in DRIVERS:
        module = sys.modules.get(name)
        if module is not None and isinstance(error, module.Error):
            return True
    return False


def open_queue(args: argparse.Namespace, worker: bool = False, migrating: bool = False) -> Queue:
    """Import the application (a worker also sets Django up and runs on_worker_start hooks),
    check the schema (unless migrating), then connect."""
    if worker:
        start_worker(args.app)
    else:
        import_app(getattr(args, "app", None))
    dsn = args.dsn or default_dsn()
    try:
        if not migrating:
            schema.require(dsn)
        return Queue.connect(dsn, lease_duration=getattr(args, "lease", options.LEASE.default))
    except NoSchema as error:
        raise CommandError(str(error)) from None
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
    if args.status:
        have, need = schema.versions(args.dsn)
        print(f"jobq: {schema.status(args.dsn)}")
        return 0 if have >= need else 1
    if args.sql or args.after is not None or args.upto is not None:
        print(schema.script(args.dsn, args.after, args.upto), end="")
        return 0
    with open_queue(args, migrating=True) as queue:
        print(f"jobq: {schema.describe(*queue.install())}")
    return 0


def cmd_work(args: argparse.Namespace) -> int:
    with open_queue(args, worker=True) as queue:
        queue.hooks = hooks.for_jobs()
        worker = PlainWorker(
            queue,
            args.types,
            poll_interval=args.poll_interval,
            max_jobs=args.max_jobs,
            schedules=list(REGISTERED),
        )
        worker.install_signal_handlers()
        worker.run()
    return 0


def cmd_schedules(args: argparse.Namespace) -> int:
    # Schedules' jobs may be a Django project's: set it up as a worker would.
    load_app(args.app)
    with open_queue(args) as queue:
        found = queue.schedule_states(stored=True)
        return reports.print_schedules(found, args.json, args.app)


def cmd_prune(args: argparse.Namespace) -> int:
    with open_queue(args) as queue:
        deleted = queue.prune(args.older_than, args.statuses)
    print(f"jobq: deleted {deleted} finished job(s)")
    return 0


def on_queue(
    run: Callable[[Queue, argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """A command that runs on a queue opened from its DSN and app options."""

    def command(args: argparse.Namespace) -> int:
        with open_queue(args) as queue:
            return run(queue, args)

    return command


def cmd_web(args: argparse.Namespace) -> int:
    try:
        from ..web import Credentials
        from ..web.app import StatusPage
        from ..web.auth import Csrf
        from ..web.hosts import AllowedHosts
        from ..web.serve import check_exposure, parse_bind, serve
    except ImportError as error:
        raise CommandError(
            f"jobq web needs the web extra (pip install 'jobq[web]'): {error}"
        ) from None
    host, port = parse_bind(args.bind)
    credentials = Credentials.from_environment()
    check_exposure(host, credentials)
    load_app(args.app)  # its schedules, for the schedules page; a Django project set up
    with open_queue(args) as queue:
        app = StatusPage(
            queue,
            args.read_only,
            credentials,
            Csrf(),
            reopen=lambda: open_queue(args),
            app=args.app,
            hosts=AllowedHosts.served_on(host, args.allowed_hosts),
        )
        serve(app, host, port)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    # Imported here, not at the top: only the demo's own workers (--app jobq.demo) should be
    # able to run its job class, not every `jobq work` on a production database.
    from ..demo import run_demo

    return run_demo(args.scenario, args.dsn)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="jobq", description="A job queue in your own database.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    def command(
        name: str, run: Callable[[argparse.Namespace], int], text: str, *taken: Option
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=text, description=text)
        taken = (options.DSN, *taken, *OUTPUT)
        options.add(sub, taken)
        sub.set_defaults(run=run, options=taken, parser=sub)
        return sub

    migrate = command("migrate", cmd_migrate, "Create or upgrade jobq's tables.")
    migrate.add_argument(
        "--sql",
        action="store_true",
        help="print the SQL the migration would run, as a script for psql, mysql or sqlite3, "
        "and run nothing",
    )
    migrate.add_argument(
        "--from",
        dest="after",
        type=int,
        metavar="N",
        help="with --sql: from schema version N (0 for an empty database; default: the "
        "database's own)",
    )
    migrate.add_argument(
        "--to",
        dest="upto",
        type=int,
        metavar="M",
        help="with --sql: up to schema version M (default: this jobq's)",
    )
    migrate.add_argument(
        "--status",
        action="store_true",
        help="say which schema version the database holds and what is pending; exit 1 when "
        "a migration is pending",
    )
    command(
        "work",
        cmd_work,
        "Run jobs in this one process, without lease renewal: each job must finish within its "
        "lease. SIGTERM/SIGINT finish the current job, then exit.",
        options.APP,
        options.TYPES,
        options.LEASE,
        options.BY_NAME["poll_interval"],
        MAX_JOBS,
    )
    stats = command(
        "stats",
        on_queue(reports.cmd_stats),
        "Count jobs by type and status, and show the supervisor's retention as this "
        "environment sets it (--retain-completed, --retain-failed).",
        options.TYPES,
        *options.RETENTION,
    )
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    schedules = command(
        "schedules",
        cmd_schedules,
        "List the periodic jobs the application declares, and those the database knows "
        "(the supervisors run them): each one's cron or interval, last and next slot, last "
        "job id and type.",
        options.APP,
    )
    schedules.add_argument("--json", action="store_true", help="print JSON instead of a table")
    nodes = command(
        "nodes",
        on_queue(cli_nodes.cmd_nodes),
        "List the supervisors heard from within the last hour: host, pid, version, pools, "
        "workers and the jobs they run, helper health; those not heard from lately as silent.",
    )
    cli_nodes.add_nodes(nodes)
    command(
        "prune",
        cmd_prune,
        "Delete finished jobs older than --older-than, in batches.",
        OLDER_THAN,
        STATUSES,
    )
    add_controls(command)
    command(
        "web",
        cmd_web,
        "Serve the status page: see jobs by type and status, read a job's payload and error, "
        "retry, cancel, pause and resume; the schedules of the application given by --app.",
        options.APP,
        *options.WEB,
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
        default=os.environ.get(options.DSN.variable),
        help="database DSN (env JOBQ_DSN; default a fresh SQLite file in a temporary directory, "
        "deleted afterwards)",
    )
    demo.set_defaults(run=cmd_demo, options=())
    return parser


def add_controls(command: Callable[..., argparse.ArgumentParser]) -> None:
    """The operator's commands (cli/controls.py)."""
    controls = cli_controls
    json_help = "print JSON (stable keys) instead of text"
    jobs = command(
        "jobs",
        on_queue(controls.cmd_jobs),
        "List jobs, newest first.",
        options.APP,
        controls.STATUS,
        controls.JOB_TYPE,
        controls.LIMIT,
    )
    jobs.add_argument("--json", action="store_true", help=json_help)
    jobs.add_argument(
        "--blocked", action="store_true", help="only pending jobs waiting on a concurrency limit"
    )
    jobs.add_argument("--batch", type=int, metavar="ID", help="only the members of this batch")
    listed = command(
        "limits", on_queue(cli_limits.cmd_limits), "List concurrency limits.", options.APP
    )
    listed.add_argument("--json", action="store_true", help=json_help)
    limit = command(
        "limit",
        on_queue(cli_limits.cmd_limit),
        "Override a job type's concurrency limit at run time, on every node.",
        options.APP,
    )
    cli_limits.add_limits(limit)
    show = command("show", on_queue(controls.cmd_show), "Show one job.", options.APP)
    show.add_argument("id", metavar="ID", help="the job's id")
    show.add_argument("--json", action="store_true", help=json_help)
    emit = command(
        "emit",
        on_queue(controls.cmd_emit),
        "Emit an event for the jobs that wait for its key (jobq.wait_for): the first emit of "
        "a key wins.",
        options.APP,
    )
    emit.add_argument("key", metavar="KEY", help="the event's key")
    emit.add_argument(
        "--payload", default="null", metavar="JSON", help="the event's payload, as JSON"
    )
    wake = command(
        "wake",
        on_queue(controls.cmd_wake),
        "Run a pending job now: a sleeping job (jobq.sleep) goes on past its sleep; one "
        "waiting for an event or its children looks again.",
        options.APP,
    )
    wake.add_argument("id", metavar="ID", help="the job's id")
    cancel = command(
        "cancel",
        on_queue(controls.cmd_cancel),
        "Cancel jobs: a pending one at once; a running one has its attempt stopped (under "
        "jobq-supervise within a renewal interval) and ends cancelled, not retried.",
        options.APP,
    )
    cancel.add_argument("ids", nargs="*", metavar="ID", help="a job's id")
    cancel.add_argument(
        "--batch", type=int, metavar="ID", help="every unfinished member of this batch"
    )
    retry = command(
        "retry",
        on_queue(controls.cmd_retry),
        "Make failed, expired or cancelled jobs pending now, with one more attempt allowed: "
        "those given by id, or every job with --status (and --type).",
        options.APP,
        controls.STATUS,
        controls.JOB_TYPE,
    )
    retry.add_argument("ids", nargs="*", metavar="ID", help="a job's id")
    pause_text = (
        "Stop workers claiming jobs of a type; running ones finish. A type that no job has "
        "and no class of --app declares is refused, unless --force is given."
    )
    for name, run, text in (
        ("pause", controls.cmd_pause, pause_text),
        ("resume", controls.cmd_resume, "Let workers claim jobs of a paused type again."),
    ):
        sub = command(name, on_queue(run), text, options.APP)
        sub.add_argument("type", metavar="TYPE", help="the job type")
        if name == "pause":
            sub.add_argument(
                "--force", action="store_true", help="pause it even if no job has it yet"
            )


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse, fill what was not given from the environment or the defaults, and set up
    logging. `args.explicit` names the options given by flag or environment variable."""
    args = parser.parse_args(argv)
    args.explicit = options.resolve(getattr(args, "parser", parser), args, args.options)
    logs.configure(
        getattr(args, "log_level", "WARNING"),
        getattr(args, "log_format", "plain"),
        dsn=getattr(args, "dsn", None) or default_dsn(),
    )
    return args


def connection_name_of(command: str) -> str:
    """What the command's connections are called in the database (backends/naming.py)."""
    if command == "work":
        return of_this_host(f"jobq worker {os.getpid()}")
    return of_this_host(f"jobq {command}") if command == "web" else f"jobq {command}"


@quiet_on_closed_stdout
def main(argv: Sequence[str] | None = None) -> int:
    hide_secrets("jobq", argv)
    args = parse(build_parser(), argv)
    name_process(connection_name_of(args.command))
    try:
        return int(args.run(args))
    except CommandError as error:
        print(f"jobq: {error}", file=sys.stderr)
        return 1
    except JobqError as error:
        # Scrubbed again: an error may quote the password outside a DSN.
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
        message = scrub(str(error).strip(), dsn) + schema.hint(dsn, error)
        print(f"jobq: database error on {scrub(dsn, dsn)}: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
