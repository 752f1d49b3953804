"""The modules the master must not have imported when it forks, kept in one place; the test
that reads the master's modules at each of its forks checks them
(tests/system/test_master_imports.py).

What the master imports before a fork is shared by every child it forks, so whatever a
worker or a helper needs anyway is best imported there once: jobq's own code, psycopg and
prometheus_client are (measured in issue 60: helpers import nothing after their fork). What
no process of the supervisor uses costs memory in each of them for nothing, and some modules
must not be in a forking process at all: they start threads or open connections, which a
fork copies half-made. The application (`--app`) is one of those for the reason given in
appcheck.py, and is checked by name in the test, beside this list.
"""

from __future__ import annotations

# name: why the master must not import it (RSS a fresh import added, measured for issue 60)
NOT_IN_MASTER: dict[str, str] = {
    "psycopg_pool": "a pool's threads and connections belong to the process that opened "
    "them; jobq uses none (8.8 MiB)",
    "opentelemetry.sdk": "the application's tracer provider and its export thread; the "
    "master uses the API alone, which does nothing until a provider is set (0.9 MiB)",
    "django": "the application's framework: settings and connections set up at import",
    "jobq.web": "the status page, served by `jobq web`, never by the supervisor (5.8 MiB)",
    "jobq.contrib": "integrations loaded by the application, in its own processes",
    "jobq.testing": "test helpers, for the applications of tests",
    "jobq.cli.ctl": "`jobq-supervise ctl`, the client of a running master, not the master",
}


def forbidden_in(modules: set[str], also: tuple[str, ...] = ()) -> list[str]:
    """The modules of `modules` (names, as in sys.modules) that are, or are inside, one of
    NOT_IN_MASTER or `also`."""
    banned = (*NOT_IN_MASTER, *also)
    return sorted(m for m in modules if any(m == b or m.startswith(b + ".") for b in banned))
