"""Checking the application in a short-lived child, so the master never imports it (unless
asked to, with --preload).

Whatever an application opens at import (a database connection, a pool, an ORM session)
belongs to the process that opened it. Imported in the master, it was inherited by every
worker forked after: two workers then spoke on one socket, and jobs read each other's rows.
So, as gunicorn does by default, only workers import the application, each after its fork,
and the master, which forks them all, holds nothing of the application's.

The master still refuses to start, and a reload still keeps the old workers, when the
application cannot be imported: a child forked for the purpose imports it and reports back.
On SIGHUP the verdict is read from the master's loop like any message, so however slow the
import, renewal and fencing go on meanwhile.

At start, the same child then checks the database's schema (or, with --migrate, installs
it): a database nobody migrated is refused in one line before any worker is forked, rather
than seen as every worker failing its first claim.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import selectors
import signal
import socket
from collections.abc import Callable
from types import FrameType

from .. import backends
from ..app import load_app
from ..errors import ConfigurationError, NoSchema
from ..job import registered_types
from ..queue import schema
from .config import SupervisorConfig
from .forking import Forked, fork

log = logging.getLogger("jobq")

# The longest error text sent back: a packet on the master's socket has a size limit.
MAX_ERROR = 4000
MAX_VERDICT = 64 * 1024
# How long the start waits for the database to answer the schema check.
DATABASE_PATIENCE = 10.0


def check(app: str | None, sock: socket.socket, then: Callable[[], bool] | None = None) -> int:
    """In the checking child: import the application, then (if it imports) run `then`, whose
    ConfigurationError refuses the start and whose answer says whether the database answered;
    send the verdict as one packet."""
    verdict = import_verdict(app)
    if verdict["error"] is None and then is not None:
        try:
            verdict["database"] = then()
        except ConfigurationError as error:
            verdict = {"refused": str(error)[-MAX_ERROR:]}
    sock.send(json.dumps(verdict).encode())
    return 0


def import_verdict(app: str | None) -> dict[str, object]:
    verdict: dict[str, object]
    try:
        load_app(app)
        verdict = {"error": None, "types": sorted(registered_types())[:100]}
    except ConfigurationError as error:
        verdict = {"error": str(error)[-MAX_ERROR:]}
    except BaseException as error:
        # The application's own bug: its traceback is worth the log lines.
        log.exception("Importing --app %s failed", app)
        verdict = {"error": f"importing --app {app!r} raised {error!r}"[-MAX_ERROR:]}
    return verdict


def prepare_database(dsn: str, migrate: bool) -> bool:
    """Refuse a database without jobq's current schema (NoSchema), or with `migrate` create
    or upgrade it; True once the database answered. A database that cannot be reached
    without --migrate is not refused (it may be an outage): the workers try it themselves;
    one that cannot be migrated is. Only the check is bounded in time: a migration may build
    indexes, or wait for another supervisor's."""
    if not migrate:
        signal.signal(signal.SIGALRM, too_slow)  # this child's own: it exits after the check
        signal.setitimer(signal.ITIMER_REAL, DATABASE_PATIENCE)
    try:
        if migrate:
            log.info("--migrate: %s", schema.migrate(dsn), extra={"event": "migrated"})
        else:
            schema.require(dsn)
        warn_of_failover_risk(dsn)
        return True
    except NoSchema as error:
        raise NoSchema(f"{error}, or start with --migrate") from None
    except Exception as error:
        if migrate:
            raise ConfigurationError(f"--migrate failed: {error}") from None
        log.warning(
            "Could not check the database's schema (%s): starting anyway, the workers will try",
            error,
            extra={"event": "schema_unchecked"},
        )
        return False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def warn_of_failover_risk(dsn: str) -> None:
    """Say so at start when the database replicates asynchronously: across a failover,
    jobq's promise holds on synchronous replication only (see docs/guides/failover.md)."""
    try:
        backend = backends.connect(dsn, create=False)
        try:
            risk = backend.failover_risk()
        finally:
            backend.close()
    except Exception as error:
        log.debug("Could not read the database's replication settings: %s", error)
        return
    if risk is not None:
        log.warning(
            "The database may lose commits in a failover: %s. A standby promoted then can lack "
            "leases, claims and acknowledgements, and two attempts of one job could overlap; "
            "jobq's promise across a failover needs synchronous replication",
            risk,
            extra={"event": "failover_risk"},
        )


def too_slow(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError(f"no answer within {DATABASE_PATIENCE:g} s")


def verdict_of(data: bytes, how: str) -> str | None:
    """The error a checking child reported (None: the application imports), from the packet
    it sent; with no packet, it died first, `how`."""
    if not data:
        return f"the process importing --app ended without a verdict ({how})"
    verdict = json.loads(data)
    error = verdict["error"]
    if error is None:
        types = verdict.get("types") or []
        log.info(
            "--app imports cleanly; job types defined: %s",
            ", ".join(types) or "none",
            extra={"event": "app_checked"},
        )
        return None
    return str(error)


def preload(app: str | None) -> None:
    """--preload: once the check passed in a child, import the application in the master
    too, so that every process forked after shares its code pages rather than importing a
    copy of its own (issue 60). Only safe for an application that opens nothing at import:
    its user says so by asking for it. What a child imports after its fork is then found
    already loaded."""
    log.info("--preload: importing --app %s in the master", app, extra={"event": "preloaded"})
    load_app(app)


def check_now(config: SupervisorConfig, let_go: Callable[[], None]) -> bool:
    """Check the database and the application before the master starts; raises
    ConfigurationError if the start must be refused, else returns whether the database
    answered. Blocking: nothing else runs yet."""
    app = config.app
    then = functools.partial(prepare_database, config.dsn, config.migrate)
    process = fork(lambda sock: check(app, sock, then), let_go)
    try:
        process.sock.setblocking(True)
        select.select([process.sock], [], [])
        data = process.sock.recv(MAX_VERDICT)
    finally:
        _, status = os.waitpid(process.pid, 0)
        process.close()
    if data and "refused" in (verdict := json.loads(data)):
        raise ConfigurationError(verdict["refused"])
    error = verdict_of(data, f"exit status {os.waitstatus_to_exitcode(status)}")
    if error is not None:
        raise ConfigurationError(error if "--app" in error else f"--app {app!r}: {error}")
    return bool(json.loads(data).get("database"))


class AppCheck:
    """A check running while the master goes on; `then(error)` is called from the master's
    loop once the verdict is in. The master's reaper collects the process."""

    def __init__(
        self,
        app: str | None,
        let_go: Callable[[], None],
        selector: selectors.BaseSelector,
        then: Callable[[str | None], None],
    ) -> None:
        self.selector = selector
        self.then = then
        self.process: Forked = fork(lambda sock: check(app, sock), let_go)
        selector.register(self.process.sock, selectors.EVENT_READ, self)

    def on_event(self, mask: int) -> None:
        try:
            data = self.process.sock.recv(MAX_VERDICT)
        except BlockingIOError:
            return
        except ConnectionResetError:
            data = b""
        self.close()
        self.then(verdict_of(data, "it died"))

    def cancel(self) -> None:
        """Give up on this check (a newer one replaces it)."""
        self.process.signal(signal.SIGKILL)
        self.close()

    def close(self) -> None:
        with contextlib.suppress(KeyError):
            self.selector.unregister(self.process.sock)
        self.process.close()


class Reloads:
    """SIGHUP's checks: one at a time, a newer request replacing the one in flight (the code
    may have changed again). `passed()` is called once a check finds the application sound;
    a failed one is logged and changes nothing."""

    def __init__(
        self,
        app: str | None,
        let_go: Callable[[], None],
        selector: selectors.BaseSelector,
        passed: Callable[[], None],
    ) -> None:
        self.app = app
        self.let_go = let_go
        self.selector = selector
        self.passed = passed
        self.running: AppCheck | None = None

    def request(self) -> None:
        if self.running is not None:
            self.running.cancel()
        log.info("Reload requested: checking --app", extra={"event": "reload_check"})
        try:
            self.running = AppCheck(self.app, self.let_go, self.selector, self.checked)
        except OSError as error:  # a failed fork: the reload fails, the master goes on
            self.checked(f"the check could not be started: {error}")

    def checked(self, error: str | None) -> None:
        self.running = None
        if error is None:
            self.passed()
        else:
            log.error(
                "Reload failed, the workers keep running the code they have: %s",
                error,
                extra={"event": "reload_failed"},
            )
