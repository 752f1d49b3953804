"""Every command-line option of jobq's commands, declared once.

Each declaration carries the default, the environment variable, the unit, the lower bound and
the help text. The argument parsers, the supervisor's own settings check and the README's
option table (docs/hooks.py) are all made from it, so none of them can drift from the others.

An environment variable is checked exactly like its flag, and an error names whichever of the
two the value came from: `JOBQ_LEASE: not a number: 'abc'`.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import logs
from .dsn import DEFAULT_DSN
from .job import check_type_name
from .pool_specs import SHAPE, parse_pool
from .retry import MAX_DELAY

LAST_PORT = 65535
# A duration's text: a number of seconds, or one with its unit (90s, 15m, 12h, 7d), or forever.
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", re.IGNORECASE)
FOREVER = "forever"
# The shortest retention: a finished job outlives twice the longest pause between a polling
# Queue.wait's reads (waiting.MAX_POLL, 2 s; tests/unit ties the two), so a wait in progress
# always reads the job's end before the job is pruned.
MIN_RETENTION = 4.0
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# The most jobs one claim may take (--prefetch). Past some tens, a batch's round trip is a
# small share of its time; a claim of thousands would hold as many leases that all run out
# while the jobs ahead of them run. (Its messages are split to fit the socket whatever the
# size: see wire.parts.)
MAX_PREFETCH = 1000
# The most attempts one worker runs at once (--concurrency): each takes a row of the fence
# table (8192 rows in all), and a thread job that must be stopped takes them all down with it.
MAX_CONCURRENCY = 1000
# What a switch's environment variable may say.
SWITCH = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False,
          "no": False, "off": False}  # fmt: skip


@dataclass(frozen=True)
class Option:
    """One option. `unit` decides how its text is read:

    - "seconds": a finite number of seconds up to MAX_DELAY, at least `minimum` (when
      `minimum` is None, above zero);
    - "count": a whole number, at least `minimum`, and at most `maximum` if it is set (with
      `beyond`, the fix the error suggests);
    - "duration": seconds as "seconds" reads them, or with a unit (90s, 15m, 12h, 7d), or
      "forever" (math.inf);
    - "MiB": a positive number of mebibytes; "port": a TCP port number, 0 meaning any free one;
    - "text": any non-empty text; "choice": one of `choices`; "type": a job type name;
    - "pool": a pool of workers, TYPES:WORKERS[:CONCURRENCY] (see pool_specs.py);
    - "switch": a flag without a value; its variable reads 1/true/yes/on or 0/false/no/off.

    A repeatable option is given as its flag once per value, or in a variable `separator` splits.
    """

    name: str  # the setting's attribute name; the flag and variable are made from it
    default: Any
    help: str
    unit: str = "seconds"
    minimum: float | None = None
    maximum: int | None = None
    beyond: str = ""
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    shown_default: str | None = None  # how the README and --help name the default
    called: str | None = None  # the flag's and variable's name, when not the attribute's
    repeatable: bool = False
    separator: str | None = ","

    @property
    def flag(self) -> str:
        return "--" + (self.called or self.name).replace("_", "-")

    @property
    def variable(self) -> str:
        return "JOBQ_" + (self.called or self.name).upper()

    def read(self, text: str) -> Any:
        """The value `text` stands for (a list for a repeatable option, whose variable
        separates its values); ValueError with the reason when it is not one."""
        if not self.repeatable:
            return self.read_one(text)
        # A stray separator is harmless, but a list of nothing must not mean "all".
        parts = [part.strip() for part in text.split(self.separator)]
        if len(parts) != 1:
            parts = [part for part in parts if part]
            if not parts:
                what = "commas" if self.separator else "spaces"
                raise ValueError(f"nothing but {what} in {text!r}")
        return [self.read_one(part) for part in parts]

    def read_one(self, text: str) -> Any:
        if self.unit == "type":
            check_type_name(text)
            return text
        if self.unit == "pool":
            return parse_pool(text, MAX_CONCURRENCY)
        if self.unit == "choice":
            match = {choice.lower(): choice for choice in self.choices}.get(text.strip().lower())
            if match is None:
                raise ValueError(f"must be one of {', '.join(self.choices)}, got {text!r}")
            return match
        if self.unit == "switch":
            value = SWITCH.get(text.strip().lower())
            if value is None:
                raise ValueError(f"must be one of {', '.join(SWITCH)}, got {text!r}")
            return value
        if self.unit == "text":
            if not text.strip():
                raise ValueError("must not be empty")
            return text
        whole = self.unit in ("count", "port")
        try:
            number = (
                duration(text) if self.unit == "duration" else int(text) if whole else float(text)
            )
        except ValueError:
            if self.unit == "duration":
                raise
            raise ValueError(f"not a {'whole ' if whole else ''}number: {text!r}") from None
        self.complain(number)
        return number

    def problem(self, value: Any) -> str | None:
        """What is wrong with a value given in Python (None: nothing, or not set)."""
        if value is None or self.unit not in ("seconds", "duration", "count", "MiB", "port"):
            return None
        try:
            self.complain(value)
        except ValueError as error:
            return str(error)
        return None

    def complain(self, value: float) -> None:
        if self.unit == "port":
            if not 0 <= value <= LAST_PORT:
                raise ValueError(f"must be a port number from 0 to 65535, got {value:g}")
            return
        if self.unit == "count":
            low = 1 if self.minimum is None else self.minimum
            if value < low:
                raise ValueError(f"must be a whole number of at least {low:g}, got {value:g}")
            if self.maximum is not None and value > self.maximum:
                raise ValueError(f"must be at most {self.maximum}, got {value:g}: {self.beyond}")
            return
        if self.unit == "duration" and value == math.inf:
            return
        unit = "s" if self.unit in ("seconds", "duration") else self.unit
        if not math.isfinite(value) or (self.minimum is None and value <= 0):
            measure = "seconds" if self.unit == "duration" else self.unit
            raise ValueError(f"must be a positive number of {measure}, got {value:g}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"must be at least {self.minimum:g} {unit}, got {value:g}")
        if self.unit in ("seconds", "duration") and value > MAX_DELAY:
            raise ValueError(f"must be at most {MAX_DELAY:.0f} s, got {value:g}")

    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        return (
            "none"
            if self.default is None
            else f"{self.default:g}"
            if isinstance(self.default, float)
            else str(self.default)
        )

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """The flag, without a default: `resolve` fills it in from the environment or the
        declaration, so a value from either is checked the same way."""
        metavar = self.metavar or {
            "seconds": "SECONDS",
            "duration": "DURATION",
            "count": "N",
            "MiB": "MIB",
        }.get(self.unit, self.unit.upper())
        extra = f"one of {', '.join(self.choices)}; " if self.choices else ""
        if self.unit == "switch":
            help = f"{self.help} (env {self.variable}=1; default {self.default_text()})"
            parser.add_argument(
                self.flag, dest=self.name, action="store_const", const=True, help=help
            )
            return
        parser.add_argument(
            self.flag,
            dest=self.name,
            type=self.parse_flag,
            action="append" if self.repeatable else "store",
            metavar=metavar,
            help=f"{self.help} ({extra}env {self.variable}; default {self.default_text()})",
        )

    def parse_flag(self, text: str) -> Any:
        try:
            value = self.read(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        if self.repeatable:
            if len(value) != 1:
                raise argparse.ArgumentTypeError(f"one value per {self.flag}: repeat the flag")
            return value[0]
        return value


def duration(text: str) -> float:
    """Seconds, from "90", "90s", "15m", "12h", "7d" or "forever" (math.inf)."""
    if text.strip().lower() == FOREVER:
        return math.inf
    match = DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"not a duration: {text!r}; give one like 90s, 15m, 12h, 7d or forever")
    return float(match[1]) * UNITS[(match[2] or "s").lower()]


def shown_duration(seconds: float) -> str:
    """A duration as the options read it, in its largest whole unit: 86400 is 1d."""
    if seconds == math.inf:
        return FOREVER
    for suffix, size in sorted(UNITS.items(), key=lambda unit: -unit[1]):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{suffix}"
    return f"{seconds:g}s"


# Shared by every command that reaches the database.
DSN = Option(
    "dsn",
    None,
    "database DSN",
    unit="text",
    metavar="DSN",
    shown_default=f"{DEFAULT_DSN} in the working directory",
)
APP = Option(
    "app",
    None,
    "the application's module: importing it registers its Job classes and declares its "
    "schedules (a supervisor's workers import it after their fork)",
    unit="text",
    metavar="MODULE",
    shown_default="none",
)
TYPES = Option(
    "types",
    (),
    "job type to work on, repeatable; comma-separated in the environment variable",
    unit="type",
    repeatable=True,
    metavar="T",
    shown_default="all types",
    called="type",
)
LISTEN_DSN = Option(
    "listen_dsn",
    None,
    "PostgreSQL behind a transaction pooler: a direct connection for idle workers' wake-ups, "
    "which otherwise poll",
    unit="text",
    metavar="DSN",
)
LEASE = Option("lease", 600.0, "lease of each claim")
LOG_LEVEL = Option(
    "log_level", "INFO", "what to log", unit="choice", choices=LOG_LEVELS, metavar="LEVEL"
)
LOG_FORMAT = Option(
    "log_format",
    "plain",
    "plain text or one JSON object per line",
    unit="choice",
    choices=logs.FORMATS,
    metavar="FORMAT",
)

# How long the supervisor's maintenance keeps finished jobs (jobq/queue/retention.py).
RETENTION = (
    Option(
        "retain_completed",
        86400.0,
        "how long completed and cancelled jobs are kept before the supervisor deletes them: "
        f"seconds, or 90s, 12h, 7d; {FOREVER}: never",
        unit="duration",
        minimum=MIN_RETENTION,
        shown_default="24h",
    ),
    Option(
        "retain_failed",
        7 * 86400.0,
        "how long failed and expired jobs are kept before the supervisor deletes them: "
        f"seconds, or 90s, 12h, 7d; {FOREVER}: never",
        unit="duration",
        minimum=MIN_RETENTION,
        shown_default="7d",
    ),
)

# The renewal and fencing options; their lower bounds keep the timing rule meaningful.
RENEWAL = (
    Option("renew_interval", 10.0, "time between renewal rounds", minimum=1.0),
    Option("renew_timeout", 5.0, "how long a renewal round may take", minimum=1.0),
    Option("kill_grace", 5.0, "from SIGTERM to SIGKILL of a stopped worker", minimum=0.0),
    Option(
        "safety_margin",
        5.0,
        "a fenced worker is dead this long before its lease ends",
        minimum=1.0,
    ),
)

SUPERVISOR = (
    DSN,
    LISTEN_DSN,
    APP,
    TYPES,
    Option(
        "pools",
        (),
        "workers of their own for these types (*: all others), repeatable, in "
        "place of --type/--workers/--concurrency; space-separated in the variable",
        unit="pool",
        repeatable=True,
        separator=None,
        metavar=SHAPE,
        shown_default="one pool",
        called="pool",
    ),
    LEASE,
    Option("workers", 4, "worker processes", unit="count"),
    *RENEWAL,
    Option("job_timeout", None, "stop a job running longer and fail its attempt"),
    Option("graceful_timeout", 30.0, "how long a drain waits for running jobs"),
    Option("max_jobs_per_child", None, "recycle a worker after this many jobs", unit="count"),
    Option(
        "max_memory_per_child",
        None,
        "recycle a worker whose RSS passes this, between jobs",
        unit="MiB",
    ),
    Option(
        "prefetch",
        None,
        "jobs a worker claims at once, run in order and acknowledged together; 1: one at a time",
        unit="count",
        shown_default="adaptive, 10 and more for very short jobs",
        maximum=MAX_PREFETCH,
        beyond="a longer claim saves no more round trips; give a smaller --prefetch",
    ),
    Option(
        "concurrency",
        1,
        "attempts a worker runs at once: async def jobs on its event loop, others in as "
        "many threads (see docs/guides/concurrency.md); 1: one at a time, in the process",
        unit="count",
        minimum=1,
        maximum=MAX_CONCURRENCY,
        beyond="run more worker processes (--workers) instead",
    ),
    Option("poll_interval", 1.0, "longest idle wait between polls"),
    Option("maintenance_interval", 10.0, "time between maintenance runs"),
    *RETENTION,
    Option(
        "horizon_warning",
        600.0,
        "warn, naming it, of what has held back the database's cleanup of dead rows this "
        "long (an open transaction, a replication slot): every claim pays for it",
    ),
    Option(
        "metrics_port",
        None,
        "serve /metrics, /healthz and /readyz on this port (0: any free one)",
        unit="port",
        shown_default="off",
    ),
    Option(
        "metrics_address",
        "127.0.0.1",
        "address to serve metrics on; give 0.0.0.0 explicitly to expose them",
        unit="text",
        metavar="ADDRESS",
    ),
    Option(
        "migrate",
        False,
        "create or upgrade jobq's tables at start, as `jobq migrate` does; without it, a "
        "database lacking them is refused",
        unit="switch",
        shown_default="off",
    ),
    Option(
        "preload",
        False,
        "import --app in the master before forking, so every worker and helper shares its "
        "code instead of importing its own copy; only for an application that opens nothing "
        "at import (no connection, pool or thread), and a reload (SIGHUP) then keeps the code "
        "loaded at start",
        unit="switch",
        shown_default="off",
    ),
    Option(
        "exit_when_empty",
        False,
        "drain and exit 0 once no job of its types is ready and none runs (jobs scheduled "
        "later do not count): for Kubernetes Jobs, CI and one-off backfills",
        unit="switch",
        shown_default="off",
    ),
    Option(
        "termination_grace_period",
        None,
        "the pod's terminationGracePeriodSeconds: refuse to start if a drain cannot fit in it",
    ),
    LOG_LEVEL,
    LOG_FORMAT,
)

BY_NAME = {o.name: o for o in SUPERVISOR}
# `jobq-supervise ctl`: which master it tells.
MASTER = Option(
    "master", None, "the master's pid", unit="count", metavar="PID", shown_default="the only one"
)

# `jobq web`: the names its page may be reached by, against DNS rebinding (web/hosts.py).
ALLOWED_HOSTS = Option(
    "allowed_hosts",
    (),
    "a host name browsers reach the status page by, beside loopback names and the --bind "
    "address (any IP address when bound to 0.0.0.0 or ::), e.g. a proxy's; `*` for any; "
    "repeatable, comma-separated in the environment variable",
    unit="text",
    repeatable=True,
    called="allowed_host",
    metavar="HOST",
    shown_default="none",
)
# `jobq web`, beside the DSN and the logging options every command takes.
WEB = (
    Option(
        "bind",
        "127.0.0.1:8080",
        "HOST:PORT to serve the status page on (port 0: any free one); an address beyond "
        "loopback needs JOBQ_WEB_TOKEN, or JOBQ_WEB_USER and JOBQ_WEB_PASSWORD (or the "
        "read-only role's JOBQ_WEB_READ_ONLY_*)",
        unit="text",
        metavar="HOST:PORT",
    ),
    Option(
        "read_only",
        False,
        "show the pages without the retry, cancel, pause and resume buttons, and refuse them",
        unit="switch",
        shown_default="off",
    ),
    ALLOWED_HOSTS,
)


def declared(name: str) -> Any:
    """The declared default of a supervisor option."""
    return BY_NAME[name].default


def add(parser: argparse.ArgumentParser, options: Sequence[Option]) -> None:
    for each in options:
        each.add_to(parser)


def resolve(
    parser: argparse.ArgumentParser, args: argparse.Namespace, options: Sequence[Option]
) -> set[str]:
    """Fill each option not given as a flag from its environment variable, else its default.

    Returns the names of the options set explicitly, by flag or variable. A bad variable
    ends the program like a bad flag does, naming the variable.
    """
    explicit = set()
    for each in options:
        if getattr(args, each.name, None) is not None:
            explicit.add(each.name)
            continue
        text = os.environ.get(each.variable)
        value = each.default
        if text is not None and text != "":
            try:
                value = each.read(text)
            except ValueError as error:
                parser.error(f"{each.variable}: {error}")
            explicit.add(each.name)
        setattr(args, each.name, value)
    return explicit
