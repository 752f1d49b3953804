"""`manage.py jobq supervise|work|migrate|stats|jobs|... [options]`: jobq's own commands, on
the database of JOBQ["DATABASE"], for this Django project.

The command replaces itself (exec) with `jobq-supervise` or `jobq`, the DSN handed over in
the environment (never on a command line, which `ps` shows). The new process never sets
Django up itself: its workers do, each after its fork, so nothing Django opened is shared.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ... import settings

COMMANDS = {
    "supervise": ["-m", "jobq.supervisor"],
    **{
        name: ["-m", "jobq", name]
        for name in (
            "work",
            "migrate",
            "stats",
            "schedules",
            "jobs",
            "show",
            "cancel",
            "retry",
            "pause",
            "resume",
        )
    },
}
# manage.py's own options, already applied (to the environment) before this command runs.
DJANGO_OPTIONS = ("--settings", "--pythonpath")


def passed_on(args: list[str]) -> list[str]:
    """The arguments for jobq, without manage.py's own options."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in DJANGO_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{option}=" for option in DJANGO_OPTIONS)):
            kept.append(arg)
    return kept


class Command(BaseCommand):
    help = f"Run jobq's commands ({', '.join(COMMANDS)}) on this project's database."

    def run_from_argv(self, argv: list[str]) -> None:
        # Everything after the subcommand is jobq's: Django's parser would refuse its options.
        args = argv[2:]
        if not args or args[0] not in COMMANDS:
            raise CommandError(f"usage: manage.py jobq {{{','.join(COMMANDS)}}} [options]")
        environment = {
            **os.environ,
            "JOBQ_DSN": settings.dsn(),
            # The project's modules: found from the working directory, or where manage.py is.
            "PYTHONPATH": os.pathsep.join(
                [os.getcwd(), sys.path[0], os.environ.get("PYTHONPATH", "")]
            ),
        }
        command = [sys.executable, *COMMANDS[args[0]], *passed_on(args[1:])]
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, command, environment)

    def handle(self, *args: Any, **options: Any) -> None:
        raise CommandError(f"run as `manage.py jobq {'|'.join(COMMANDS)}`")
