"""The housekeeper: a process of the master's with its own connection, for the master's
other database work. It runs maintenance on an interval (with the job cleaner, retention.py,
on its own longer one), fails the attempts of workers
that died holding them (and releases the ones they never started, and acknowledges the ones
they completed), and enqueues the periodic jobs' due slots. None of this can delay a
renewal, which has a process of its own.

The schedules are declared in the application, which the master never imports (see
appcheck.py): the housekeeper imports it itself, after its fork, as a worker does. A
housekeeper started again (after a crash) imports it afresh.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import time

from setproctitle import setproctitle

from .. import protocol, wire
from ..app import load_app
from ..backends.naming import name_process, of_this_host
from ..outcomes import FAILURE_OUTCOMES
from ..queue import Queue
from ..queue.retention import Retention
from ..schedules import REGISTERED, Periodic
from ..schedules.scheduler import Tick, Watch
from .renewer import close_quietly

log = logging.getLogger("jobq")

# The master's messages that ask for work; any other one (drain) ends the housekeeper.
WORK = (
    protocol.FailAttempt
    | protocol.LeftBehind
    | protocol.MeasureDepth
    | protocol.MeasureWork
    | protocol.Heartbeat
)
# After a failed maintenance run the next comes this soon, doubling up to the interval: the
# master's /readyz learns from these runs that the database is back (after a failover, a
# whole interval later was 9 s of a node not ready while its workers already worked).
FIRST_RETRY = 0.5
MAX_RETRY = 2.0


def serve(
    dsn: str,
    lease: float,
    interval: float,
    app: str | None,
    metrics: bool,
    retention: Retention,
    sock: socket.socket,
) -> int:
    """Work until the master says drain (after the failures it sent before) or goes away.
    With `metrics` (served by the master), the queue's depth is read after each maintenance
    run too: the figures exist for /metrics alone, and each reading counts every job in
    the table (1.2 s of PostgreSQL time at 1,000,000 jobs, every maintenance interval)."""
    setproctitle("jobq-supervise: housekeeper")
    name_process(of_this_host("jobq housekeeper"))
    sock.setblocking(True)
    schedules = declared(app)
    if schedules:
        wire.send(sock, protocol.Scheduled([], [periodic.name for periodic in schedules]))
    connection: Queue | None = None
    # Since this process watches the schedules, across its reconnections (see run_schedules).
    watch = Watch()
    next_maintenance = time.monotonic()
    cleaner = Cleaner(retention, interval)
    retry = FIRST_RETRY
    next_schedule = time.monotonic() if schedules else float("inf")
    while True:
        wait = max(0.0, min(next_maintenance, next_schedule) - time.monotonic())
        readable, _, _ = select.select([sock], [], [], wait)
        now = time.monotonic()
        # A due slot comes before the messages waiting: a stream of them cannot starve it.
        scheduling = now >= next_schedule
        message = wire.receive(sock) if readable and not scheduling else None
        if readable and not scheduling and not isinstance(message, WORK):
            break  # drain, or the master closed the socket
        # Before connecting: a database that cannot be reached is tried again next interval,
        # not in a tight loop that floods the log. (A due slot comes with no message.)
        if scheduling:
            next_schedule = now + interval
        elif message is None:
            if now < next_maintenance:
                continue
            next_maintenance = now + interval
        try:
            connection = connected(connection, dsn, lease)
            if scheduling:
                tick = connection.run_schedules(schedules, watch=watch)
                next_schedule = time.monotonic() + tick.wait()
                report_taken(sock, tick)
            elif message is not None:
                answer(connection, sock, message, schedules)
            else:
                maintain(connection, sock, metrics)
                retry = FIRST_RETRY
                cleaner.run_if_due(connection, sock, metrics)
        except Exception as error:
            # Maintenance recovers whatever could not be failed here, after the lease.
            log.error("Supervisor database work failed: %s", error, extra={"event": "db_error"})
            close_quietly(connection)
            connection = None
            if message is None and not scheduling:
                wire.send(sock, protocol.Maintained(None, f"{type(error).__name__}: {error}"))
                next_maintenance = time.monotonic() + min(retry, MAX_RETRY, interval)
                retry *= 2
        if isinstance(message, protocol.FailAttempt | protocol.LeftBehind):
            wire.send(sock, protocol.Done())
    close_quietly(connection)
    return 0


def connected(connection: Queue | None, dsn: str, lease: float) -> Queue:
    """The housekeeper's connection, made anew after a failure closed the last one."""
    return Queue.connect(dsn, lease_duration=lease) if connection is None else connection


def report_taken(sock: socket.socket, tick: Tick) -> None:
    """Tell the master which slots a look at the schedules enqueued, if any."""
    if tick.taken:
        slots = [(name, str(outcome)) for name, outcome, _ in tick.taken]
        wire.send(sock, protocol.Scheduled(slots))


def maintain(connection: Queue, sock: socket.socket, metrics: bool) -> None:
    """One maintenance run, its counts sent to the master, and the depth after it for
    /metrics."""
    counts = connection.run_maintenance()
    wire.send(sock, protocol.Maintained(counts))
    wire.send(sock, horizon(connection))
    if metrics:
        wire.send(sock, depth(connection))


def horizon(connection: Queue) -> protocol.HorizonRead:
    """The cleanup horizon's holder. A database that will not tell (MariaDB without the
    PROCESS privilege) costs the watch, not the maintenance."""
    try:
        held = connection.horizon()
    except Exception as error:
        return protocol.HorizonRead(None, None, None, f"{type(error).__name__}: {error}")
    return protocol.HorizonRead(held.age, held.backlog, held.holder)


class Cleaner:
    """The job cleaner's runs, each after a maintenance run once its own interval (see
    Retention.interval) has passed since the last that worked."""

    def __init__(self, retention: Retention, maintenance_interval: float) -> None:
        self.retention = retention
        self.interval = retention.interval(maintenance_interval)
        self.next_run = time.monotonic()

    def run_if_due(self, connection: Queue, sock: socket.socket, metrics: bool) -> None:
        """Report a run to the master with, for /metrics, the oldest finished job's age
        after it (read only when metrics are served)."""
        now = time.monotonic()
        if now < self.next_run:
            return
        cleaned = connection.run_retention(self.retention)
        oldest = connection.oldest_finished() if metrics else None
        wire.send(sock, protocol.Pruned(cleaned.pruned, cleaned.seconds, oldest))
        self.next_run = now + self.interval


def answer(
    connection: Queue, sock: socket.socket, message: object, schedules: list[Periodic]
) -> None:
    """Do what one of the master's WORK messages asks."""
    if isinstance(message, protocol.FailAttempt):
        (claim,) = protocol.claims([message.claim])
        status = connection._settle_failure(claim, message.error)
        outcome = FAILURE_OUTCOMES[status]
        wire.send(sock, protocol.Settled(claim.type, str(outcome)))
    elif isinstance(message, protocol.LeftBehind):
        wire.send(sock, settle_left_behind(connection, message))
    elif isinstance(message, protocol.MeasureDepth):
        wire.send(sock, depth(connection))
    elif isinstance(message, protocol.MeasureWork):
        left = connection._work_left(message.types, message.workers)
        wire.send(sock, protocol.WorkLeft(left))
    elif isinstance(message, protocol.Heartbeat):
        beat = message
        facts = with_schedules(beat.facts, schedules)
        connection._beat(beat.node, beat.host, beat.pid, beat.version, facts, beat.retention)


def with_schedules(facts: str, schedules: list[Periodic]) -> str:
    """The master's view, and the schedules this housekeeper runs, which the master never
    imports: the status page shows them with the type each enqueues (queue/nodes.py)."""
    declared = [
        {"name": each.name, "spec": each.spec, "type": each.type or each.job.type}
        for each in schedules
    ]
    return json.dumps(json.loads(facts) | {"schedules": declared}, separators=(",", ":"))


def settle_left_behind(connection: Queue, message: protocol.LeftBehind) -> protocol.Released:
    """Acknowledge a dead worker's completed attempts, then release every other attempt it
    holds but those it ran: what it claimed and never started, reported or not."""
    claims = protocol.claims(message.completed)
    if claims:
        connection.complete_many_and_claim(claims, 0)
    keep = {claim.id for claim in claims} | set(message.running)
    return protocol.Released(connection.release_left_behind(message.worker, keep))


def declared(app: str | None) -> list[Periodic]:
    """The application's schedules. An application that fails to import here (the master
    checked that it imports) costs its schedules, not the housekeeper's other work."""
    if not app:
        return []
    try:
        load_app(app)
    except BaseException:
        log.exception(
            "The housekeeper could not import --app %s: periodic jobs are not enqueued",
            app,
            extra={"event": "schedules_unavailable"},
        )
        return []
    return list(REGISTERED)


def depth(connection: Queue) -> protocol.Depth:
    counts = connection._depth()
    return protocol.Depth(
        [(name, status, n) for (name, status), n in counts.items()],
        connection.oldest_ready(),
        tuple(sorted(connection.paused())),
        tuple((row.type, row.name, row.in_use, row.blocked) for row in connection.limits()),
    )
