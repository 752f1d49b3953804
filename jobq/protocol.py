"""The messages between the supervisor's processes, and their form on the wire (a dict).

They travel over a SOCK_SEQPACKET socket pair (see wire.py): the kernel keeps message
boundaries and order, and a closed end reads as end-of-file, so neither side needs a
handshake.

worker -> master: ready, claimed, settling, finished, releasing.
Each message about an attempt names it by its job id and its token (`Named`): a message that
reaches the other side once its attempt has ended (a late stop, say) cannot be taken for the
job's next attempt, which has a token of its own.
master -> worker: drain, stop (a concurrent worker's one attempt).
(Extensions reach a worker's fence through the fence table, not as messages, and a queued
attempt's start reaches the master the same way.)
master -> renewer: renew.                         renewer -> master: renewed.
master -> housekeeper: fail_attempt, left_behind, measure_depth, measure_work, drain.
housekeeper -> master: maintained, horizon, pruned, depth, work_left, settled, released.

A worker holds up to --prefetch attempts at once (see worker/prefetch.py). Each claim it makes
is reported in one message, `claimed` or a `finished`'s `then`: its first attempt starts at
once (the worker fenced itself on it before sending), the others are queued. A queued
attempt's start is not a message: the worker writes it in its fence slot (worker/fence.py),
which the master reads (WorkerProcess.follow). What the slot cannot say goes in a message
sent before the worker names a later attempt there: a failed attempt is acknowledged at
once, in a `finished` of its own; a completed one with a result sends `settling` (its result,
or that it is too large to carry); completed ones are acknowledged together, in one
`finished` whose `then` is the next claim (with how long each ran, for the metrics). So
once the master has read a worker's messages, every attempt of its claim before the one
its slot names is ended: reported, or completed with no result (a worker that died while
writing its slot leaves the attempt the slot names in doubt, and it is left to maintenance
after its lease). `releasing` comes
before the worker puts queued attempts back to pending: from then on the master no longer
vouches for them. So whenever the master acts, it knows which attempt runs (the one it
fences), which queued ones never started, and which completed ones await their
acknowledgement (completed by the housekeeper if the worker dies). Every row a worker claims
names it (its worker id, chosen by the master before the fork), so when it dies the
housekeeper also releases the claims it made and never got to report.

A concurrent worker (--concurrency N) runs up to N attempts at once and queues none: its
`claimed` and `finished`'s `then` say `at_once`, every attempt they carry runs now, each fenced
in a fence row of its own. `settling` says that those running attempts' code is done and
their outcomes are being recorded (they run no code any more: a round that misses them kills
nothing); a `finished` then ends them. When one of its attempts must stop, the master sends
`stop(id, token)`: a coroutine attempt is cancelled and failed with the error given; if the
attempt still runs a kill grace later (a thread, a coroutine that swallowed the cancel, or
work it handed to a thread, or a process it started), the master kills the whole worker,
before the lease's kill point. A concurrent attempt is `settling` only once its code and
everything it started have stopped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from .records import ClaimedJob
from .retry import stored_policy


@dataclass(frozen=True)
class Ready:
    """The child is connected and about to claim: it started successfully."""

    kind: ClassVar[str] = "ready"
    pid: int


# An attempt as a message carries it: everything but the payload, as (id, token, attempt,
# type, class name, retry policy as its four fields, lease end in ISO form, deadline in ISO
# form or None, expires_monotonic, encoded result). The result is a completed attempt's,
# for the master to store should it acknowledge the attempt for a worker that died first;
# None while it runs.
Row = tuple[
    int, str, int, str, str, tuple[int, float, float, bool], str, str | None, float, str | None
]


# An attempt as the messages that end or stop it name it: its job id and its token.
Named = tuple[int, str]


def named(claims: Iterable[ClaimedJob]) -> list[Named]:
    return [(claim.id, claim.token) for claim in claims]


def attempts(claims: Iterable[ClaimedJob]) -> list[Row]:
    """Claims as a message carries them: plain tuples, which marshal writes as they are.

    A claim's attempts share their lease's end (one statement's clock, converted once, see
    Backend.claims) and mostly their retry policy (retry.stored_policy shares one object
    per policy), so each is put in text once per run of the same object, not per attempt;
    marshal then writes the repeated string and tuple once and refers back to them. A
    dataclass per attempt, built with two isoformats and a copy of its policy, was the
    largest part of a claim's report (bench/RESULTS.md, issue 36)."""
    rows: list[Row] = []
    until: object = None
    policy: object = None
    for claim in claims:
        if claim.lease_until is not until:
            until, end = claim.lease_until, claim.lease_until.isoformat()
        if claim.retry is not policy:
            policy = retry = claim.retry
            fields = (retry.max_attempts, retry.backoff, retry.max_backoff, retry.jitter)
        deadline = claim.deadline
        rows.append(
            (
                claim.id,
                claim.token,
                claim.attempt,
                claim.type,
                claim.class_name,
                fields,
                end,
                None if deadline is None else deadline.isoformat(),
                claim.expires_monotonic,
                claim.result,
            )
        )
    return rows


def claims(rows: Iterable[Row]) -> list[ClaimedJob]:
    """The attempts a message carries, as the master knows them: everything but the
    payload. A lease end repeated from the row before is parsed once."""
    known: list[ClaimedJob] = []
    end: str | None = None
    lease_until = datetime.min
    for job_id, token, attempt, type, class_name, retry, until, deadline, expires, result in rows:
        if until != end:
            end, lease_until = until, datetime.fromisoformat(until)
        known.append(
            ClaimedJob(
                id=job_id,
                type=type,
                class_name=class_name,
                payload="",
                attempt=attempt,
                token=token,
                lease_until=lease_until,
                retry=stored_policy(*retry),
                deadline=None if deadline is None else datetime.fromisoformat(deadline),
                expires_monotonic=expires,
                result=result,
            )
        )
    return known


# The largest encoded result a report carries. Its marshalled form (UTF-8: up to four bytes
# a character) must fit one part of a message (wire.limit(), about 200 KiB).
CARRIED_RESULT = 16 * 1024


def carried(claims: Iterable[ClaimedJob]) -> list[tuple[int, str | None]]:
    """Completed attempts, with their encoded results, as a report carries them: those
    whose result is too large to are left out (and so to maintenance, if the worker dies
    before it acknowledges them)."""
    return [
        (claim.id, claim.result)
        for claim in claims
        if claim.result is None or len(claim.result) <= CARRIED_RESULT
    ]


@dataclass(frozen=True)
class Claimed:
    """The child holds these attempts: it runs the first now, the others after it, in order.
    Sent before decoding, so the master tracks every lease from the moment it exists."""

    kind: ClassVar[str] = "claimed"
    attempts: list[Row]
    at_once: bool = False  # they all run now (a concurrent worker), none is queued


@dataclass(frozen=True)
class Finished:
    """These attempts were acknowledged, each as (job id, token, outcome: completed, failed,
    lost...), and, when the acknowledgement claimed more jobs in the same commit, the
    attempts that claim began (as in Claimed: the first runs now)."""

    kind: ClassVar[str] = "finished"
    outcomes: list[tuple[int, str, str]]  # (job id, token, outcome)
    then: list[Row] = field(default_factory=list)
    at_once: bool = False  # as in Claimed: every attempt of `then` runs now
    # How long each attempt of `outcomes` ran, in seconds, as its worker timed it (None: not
    # timed). The master does not see every start, so cannot time them itself.
    ran: list[float | None] = field(default_factory=list)


@dataclass(frozen=True)
class Settling:
    """These running attempts ran their code to its end; their outcomes are being recorded.
    Sent by a concurrent worker, before it records them, and by a prefetching one for an
    attempt that completed with a result, before it starts the next. Of those, `results`
    names the ones that completed, with their encoded results: if the worker dies before it
    records them, the master has those acknowledged, and leaves every other one (a failure,
    or a result too large to carry here) to maintenance after its lease."""

    kind: ClassVar[str] = "settling"
    attempts: list[Named]
    results: list[tuple[int, str | None]] = field(default_factory=list)


@dataclass(frozen=True)
class Releasing:
    """The child puts these queued attempts back to pending, unstarted: stop vouching."""

    kind: ClassVar[str] = "releasing"
    attempts: list[Named]


@dataclass(frozen=True)
class Drain:
    """Finish the current job, claim no more, and exit."""

    kind: ClassVar[str] = "drain"


@dataclass(frozen=True)
class Stop:
    """Stop this running attempt (a concurrent worker's), named by its token: cancel it if it
    is a coroutine, and fail it with `error`. The master kills the whole worker if it still
    runs after the kill grace. A stop that reaches the worker once the attempt has ended is
    dropped: it must never stop the job's next attempt."""

    kind: ClassVar[str] = "stop"
    id: int
    token: str
    error: str


@dataclass(frozen=True)
class Renew:
    """Extend these (job id, token) leases, all in one statement; and record the starts of
    `started` (job id -> seconds since it started), attempts a worker claimed behind others
    and has started since, whose starts no statement recorded yet."""

    kind: ClassVar[str] = "renew"
    round: int
    claims: list[tuple[int, str]]
    started: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Renewed:
    """The ids whose leases were extended, or the error that stopped the round; and of the
    extended ones, those whose jobs an operator cancelled."""

    kind: ClassVar[str] = "renewed"
    round: int
    extended: list[int] | None
    error: str | None = None
    cancelled: tuple[int, ...] = ()


@dataclass(frozen=True)
class FailAttempt:
    """Fail this attempt, whose worker died holding it."""

    kind: ClassVar[str] = "fail_attempt"
    claim: Row
    error: str


@dataclass(frozen=True)
class LeftBehind:
    """A dead worker's attempts: acknowledge those it completed and had not acknowledged,
    then put back to pending every other attempt its claims named it in (by its worker id,
    reported or not), but those it ran (`running`), each failed or left to maintenance
    on its own."""

    kind: ClassVar[str] = "left_behind"
    worker: str
    completed: list[Row]
    running: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Released:
    """The housekeeper put a dead worker's unstarted attempts back: their types, for the
    metrics."""

    kind: ClassVar[str] = "released"
    types: list[str]


@dataclass(frozen=True)
class MeasureDepth:
    """Read the queue's depth and the oldest ready job's age, for the metrics."""

    kind: ClassVar[str] = "measure_depth"


@dataclass(frozen=True)
class Depth:
    """Jobs by (type, status, count), per type the oldest ready job's age in seconds, the
    paused types, and the concurrency limits as (type, limit, slots in use, jobs blocked)."""

    kind: ClassVar[str] = "depth"
    counts: list[tuple[str, str, int]]
    oldest: dict[str, float]
    paused: tuple[str, ...] = ()
    limits: tuple[tuple[str, str, int, int], ...] = ()


@dataclass(frozen=True)
class HorizonRead:
    """What holds back the database's cleanup of dead rows, read after a maintenance run
    (see records.Horizon), or why it could not be read."""

    kind: ClassVar[str] = "horizon"
    age: float | None
    backlog: int | None
    holder: str | None
    error: str | None = None


@dataclass(frozen=True)
class Heartbeat:
    """Record the node's heartbeat row (backends/nodes.py): `facts` is the master's view of
    its pools, workers, their attempts and its helpers, as JSON text; rows not heard from for
    `retention` seconds are forgotten."""

    kind: ClassVar[str] = "heartbeat"
    node: str
    host: str
    pid: int
    version: str
    facts: str
    retention: float


@dataclass(frozen=True)
class Maintained:
    """A maintenance run's counts (requeued, failed, expired), or why it failed."""

    kind: ClassVar[str] = "maintained"
    counts: dict[str, int] | None
    error: str | None = None


@dataclass(frozen=True)
class MeasureWork:
    """Say whether any job of `types` (all when empty) is ready, or in progress on one of
    `workers` (their ids), for --exit-when-empty."""

    kind: ClassVar[str] = "measure_work"
    types: list[str]
    workers: list[str]


@dataclass(frozen=True)
class WorkLeft:
    """MeasureWork's answer."""

    kind: ClassVar[str] = "work_left"
    left: bool


@dataclass(frozen=True)
class Pruned:
    """A cleaner run (queue/retention.py): finished jobs deleted, its duration, and the
    oldest finished job's age after it (None: none is left, or /metrics is not served)."""

    kind: ClassVar[str] = "pruned"
    deleted: int
    seconds: float
    oldest: float | None = None


@dataclass(frozen=True)
class Settled:
    """The housekeeper failed a dead worker's attempt: what followed, for the metrics."""

    kind: ClassVar[str] = "settled"
    type: str
    outcome: str


@dataclass(frozen=True)
class Scheduled:
    """Slots the housekeeper took: (schedule, outcome) pairs, for the metrics."""

    kind: ClassVar[str] = "scheduled"
    slots: list[tuple[str, str]]
    # The schedules the application declares, sent once as the housekeeper starts, so that
    # their series exist (at zero) before their first slot.
    declared: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Done:
    """The housekeeper handled the oldest FailAttempt or LeftBehind it was sent (whether the
    database took it or not): until then the master keeps it, to send it again to the next
    housekeeper if this one dies."""

    kind: ClassVar[str] = "done"


Message = (
    Ready
    | Claimed
    | Settling
    | Finished
    | Releasing
    | Drain
    | Stop
    | Renew
    | Renewed
    | FailAttempt
    | LeftBehind
    | Released
    | MeasureDepth
    | Depth
    | Maintained
    | HorizonRead
    | Heartbeat
    | MeasureWork
    | WorkLeft
    | Pruned
    | Settled
    | Scheduled
    | Done
)

KINDS: dict[str, type[Message]] = {
    cls.kind: cls
    for cls in (
        Ready,
        Claimed,
        Settling,
        Finished,
        Releasing,
        Drain,
        Stop,
        Renew,
        Renewed,
        FailAttempt,
        LeftBehind,
        Released,
        MeasureDepth,
        Depth,
        Maintained,
        HorizonRead,
        Heartbeat,
        MeasureWork,
        WorkLeft,
        Pruned,
        Settled,
        Scheduled,
        Done,
    )
}


def encode(message: Message) -> dict[str, Any]:
    # vars(), not dataclasses.asdict(): a shallow copy is all marshal needs, and asdict's
    # deep copy was a tenth of a worker's CPU per job. Attempts travel as tuples already.
    return {"kind": message.kind, **vars(message)}


def decode(fields: dict[str, Any]) -> Message:
    return KINDS[fields.pop("kind")](**fields)
