"""The operator's commands: `jobq jobs`, `show`, `cancel`, `retry`, `pause`, `resume`.

Each runs on a queue the caller opened (cli.py: the same DSN and app options as every
command). Bad input is one line on stderr and exit 1. A command given several ids checks
them all before it acts: any malformed one is named, one line each, and nothing is done.
Then it acts on every id, one line each, going on past a refused one, and exits 1 if any was
refused. `--json` output is for scripts: its keys and their order are fixed (RECORD_KEYS),
times are ISO 8601 in UTC, absent values are null, and a payload stored as a JSON object is
given decoded (any other stored text as the string it is).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from ..attempt_log import AttemptEntry
from ..backends.step_records import StepRecord
from ..errors import CommandError
from ..job import check_type_name
from ..options import Option
from ..queue import Queue
from ..queue.controls import is_id, on_retry, why_not_retried
from ..queue.suspending import SUSPENDED
from ..records import JobRecord, Status
from .terminal import escaped

# The keys of a job in --json output, in this order. New keys may be added at the end.
RECORD_KEYS = (
    "id",
    "type",
    "status",
    "priority",
    "attempts",
    "max_attempts",
    "class_name",
    "payload",
    "last_error",
    "scheduled_at",
    "deadline",
    "lease_until",
    "created_at",
    "updated_at",
    "finished_at",
    "host",
    "pid",
    "cancel_requested_at",
    "unique_key",
    "worker",
    "result",
    "error_class",
    "progress",
    "checkpoint",
    "history",
    "started_at",
    "attempted_at",
)
# `jobq show --json` adds the job's concurrency key and the limit it waits on (both null
# when none), the jobs it was enqueued after and those enqueued after it, its durable steps,
# the event it waits for, and why it suspended itself (jobq.sleep, wait_for, gather):
# reading them is more queries, worth it for one job, not for a listing.
SHOW_KEYS = (
    *RECORD_KEYS,
    "concurrency_key",
    "waits_on",
    "parents",
    "dependents",
    "on_retry",
    "steps",
    "waits_for_event",
    "suspended",
)
STATUS = Option(
    "status",
    None,
    "only jobs with this status",
    unit="choice",
    choices=tuple(map(str, Status)),
    metavar="S",
    shown_default="any",
)
JOB_TYPE = Option(
    "job_type", None, "only jobs of this type", unit="type", metavar="T", called="type"
)
LIMIT = Option("limit", 100, "show at most this many jobs, newest first", unit="count")
# `jobq retry --status` pages through the matching jobs this many at a time.
RETRY_PAGE = 500
RETRYABLE_STATUSES = (Status.FAILED, Status.EXPIRED, Status.CANCELLED)


def parsed_id(text: str) -> int | None:
    """The job id `text` gives on the command line, None unless it is one."""
    try:
        value = int(text)
    except ValueError:
        return None
    return value if is_id(value) else None


def job_id(text: str) -> int:
    """An id given on the command line; CommandError unless it is one."""
    value = parsed_id(text)
    if value is None:
        raise CommandError(f"not a job id: {text!r}")
    return value


def job_ids(texts: list[str]) -> list[int]:
    """Every id given, checked before any is acted on: each malformed one gets its line on
    stderr, and then CommandError, so that a typo in a list does nothing rather than part."""
    values = [parsed_id(text) for text in texts]
    bad = [text for text, value in zip(texts, values, strict=True) if value is None]
    for text in bad:
        print(f"jobq: not a job id: {text!r}", file=sys.stderr)
    if bad:
        raise CommandError(
            f"nothing done: {len(bad)} of the {len(texts)} arguments are not job ids"
        )
    return [value for value in values if value is not None]


def payload_value(payload: str) -> Any:
    """A payload for --json: a JSON object (what the default codec stores) decoded; any
    other codec's text, or JSON that is not an object, as the string stored."""
    try:
        value = json.loads(payload, parse_constant=not_json)
    except ValueError:
        return payload
    return value if isinstance(value, dict) else payload


def not_json(constant: str) -> Any:
    # NaN and Infinity would be printed as they came, which no strict JSON reader takes.
    raise ValueError(f"{constant} is not JSON")


def as_json(record: JobRecord) -> dict[str, Any]:
    values = {
        "id": record.id,
        "type": record.type,
        "status": str(record.status),
        "priority": record.priority,
        "attempts": record.attempts,
        "max_attempts": record.retry.max_attempts,
        "class_name": record.class_name,
        "payload": payload_value(record.payload),
        "last_error": record.last_error,
        "scheduled_at": record.scheduled_at,
        "deadline": record.deadline,
        "lease_until": record.lease_until,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "finished_at": record.finished_at,
        "host": record.host,
        "pid": record.pid,
        "worker": record.worker,
        "cancel_requested_at": record.cancel_requested_at,
        "unique_key": record.unique_key,
        "result": record.result,
        "error_class": record.error_class,
        "progress": None if record.progress is None else record.progress._asdict(),
        "checkpoint": record.checkpoint,
        "history": [timed(vars(entry)) for entry in record.history],
        "started_at": record.started_at,
        "attempted_at": record.attempted_at,
    }
    return timed({key: values[key] for key in RECORD_KEYS})


def timed(values: dict[str, Any]) -> dict[str, Any]:
    """The values with their times in ISO 8601."""
    return {
        key: value.isoformat() if isinstance(value, datetime) else value
        for key, value in values.items()
    }


def printed(value: Any) -> str:
    """A result as --json writes it: JSON, unless a codec decoded it into something else."""
    return json.dumps(value, ensure_ascii=False, default=repr)


def attempt_line(entry: AttemptEntry) -> str:
    began = "?" if entry.started_at is None else entry.started_at.isoformat(timespec="seconds")
    return f"attempt {entry.attempt} on worker {entry.worker or '?'} from {began}: {entry.outcome}"


def step_line(step: StepRecord) -> str:
    at = step.recorded_at.isoformat(timespec="seconds")
    return f"{step.name} (attempt {step.attempt}, {at}, {step.size} B)"


def where(record: JobRecord) -> str:
    return "" if record.host is None else f"{record.host}:{record.pid}"


def status_text(record: JobRecord) -> str:
    """The status as the text output shows it: of a job in progress, whether its attempt is
    being cancelled, or is claimed and waits in its worker's queue, not running yet (--json
    shows that as an attempted_at of null)."""
    if cancelling(record):
        return f"{record.status} (cancelling)"
    if record.claimed_unstarted:
        return f"{record.status} (claimed, not started)"
    return str(record.status)


def cancelling(record: JobRecord) -> bool:
    """Whether a cancel was asked of this job's attempt, which still runs: once it ends, the
    job is cancelled (or completed, had it won the race) and the request is history."""
    return record.cancel_requested_at is not None and record.status is Status.IN_PROGRESS


def cmd_jobs(queue: Queue, args: argparse.Namespace) -> int:
    if args.blocked and args.status not in (None, Status.PENDING):
        raise CommandError("--blocked jobs are pending: give no other --status")
    records = (
        queue.blocked(type=args.job_type, limit=args.limit)
        if args.blocked
        else queue.jobs(status=args.status, type=args.job_type, limit=args.limit)
        if args.batch is None
        else members(queue, args)
    )
    if args.json:
        print(json.dumps([as_json(record) for record in records], indent=2, default=repr))
        return 0
    header = (
        "id", "type", "status", "priority", "attempts", "scheduled_at", "running on", "progress"
    )  # fmt: skip
    rows = [
        (
            str(r.id),
            r.type,
            status_text(r),
            str(r.priority),
            f"{r.attempts}/{r.retry.max_attempts}",
            r.scheduled_at.isoformat(timespec="seconds"),
            where(r),
            "" if r.progress is None else str(r.progress),
        )
        for r in records
    ]
    print_table(header, rows)
    return 0


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns as wide as their widest cell, two spaces apart."""
    rows = [[escaped(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def cmd_show(queue: Queue, args: argparse.Namespace) -> int:
    record = queue.get(job_id(args.id))
    if record is None:
        raise CommandError(f"no job with id {args.id}")
    shown = as_json(record)
    shown["concurrency_key"], shown["waits_on"] = queue.waits_on(record.id)
    shown["parents"] = list(queue.parents(record.id))
    shown["dependents"] = list(queue.dependents(record.id))
    shown["on_retry"] = on_retry(record, queue.parents_left(record.id))
    steps = queue.steps(record.id)
    shown["steps"] = [timed(step._asdict()) for step in steps]
    shown["waits_for_event"] = queue.awaited(record.id)
    shown["suspended"] = suspension(record)
    if args.json:
        print(json.dumps(shown, indent=2, default=repr))
        return 0
    shown["status"] = status_text(record)
    shown["payload"] = record.payload  # as stored: one line, whatever the codec
    shown["result"] = None if record.result is None else printed(record.result)
    shown["progress"] = record.progress
    shown["checkpoint"] = None if record.checkpoint is None else printed(record.checkpoint)
    shown["history"] = "; ".join(map(attempt_line, record.history)) or None
    shown["steps"] = "; ".join(map(step_line, steps)) or None
    for key in ("parents", "dependents"):
        shown[key] = ", ".join(map(str, shown[key])) or None
    width = max(map(len, shown))
    for key, value in shown.items():
        text = "" if value is None else escaped(str(value), lines=key == "last_error")
        print(f"{key:<{width}}  {text}".rstrip())
    return 0


def suspension(record: JobRecord) -> str | None:
    """Why a pending job suspended itself (sleeping until..., waiting for...), from the last
    error its suspension wrote; None for any other job. A later failure or a retry
    overwrites that error, and a claim makes the job in progress."""
    prefix = f"{SUSPENDED}: "
    if record.status is Status.PENDING and (record.last_error or "").startswith(prefix):
        return (record.last_error or "")[len(prefix) :]
    return None


def members(queue: Queue, args: argparse.Namespace) -> list[JobRecord]:
    """`jobq jobs --batch`: the batch's members, newest first."""
    if args.blocked:
        raise CommandError("give --batch or --blocked, not both")
    if args.status is not None or args.job_type is not None:
        raise CommandError("give --batch alone, or --status and --type without it")
    return queue.batch_jobs(args.batch, args.limit)


def cmd_wake(queue: Queue, args: argparse.Namespace) -> int:
    if queue.wake(job_id(args.id)):
        print(f"jobq: job {args.id} is due now")
        return 0
    print(f"jobq: job {args.id} not woken: it is not pending, or due already", file=sys.stderr)
    return 1


def cmd_emit(queue: Queue, args: argparse.Namespace) -> int:
    try:
        payload = json.loads(args.payload)
    except ValueError as error:
        raise CommandError(
            f"--payload is not JSON ({error}); quote it, e.g. --payload '{{}}'"
        ) from None
    waiting = queue.emit(args.key, payload)
    print(f"jobq: emitted {args.key!r}" + ("; a job was waiting for it" if waiting else ""))
    return 0


def cmd_cancel(queue: Queue, args: argparse.Namespace) -> int:
    if args.batch is not None:
        if args.ids:
            raise CommandError("give job ids or --batch, not both")
        count = queue.cancel_batch(args.batch)
        print(f"jobq: batch {args.batch}: {count} unfinished member(s) cancelled or stopping")
        return 0
    if not args.ids:
        raise CommandError("give job ids, or --batch ID to cancel a batch's members")
    refused = 0
    for number in job_ids(args.ids):
        if not queue.cancel(number):
            record = queue.get(number)
            why = "no such job" if record is None else f"it is {record.status} already"
            print(f"jobq: job {number} not cancelled: {why}", file=sys.stderr)
            refused += 1
            continue
        record = queue.get(number)
        if record is not None and record.status is Status.IN_PROGRESS:
            print(f"jobq: job {number} is being cancelled: its attempt is stopped")
        else:
            print(f"jobq: job {number} cancelled")
    return 1 if refused else 0


def chosen(queue: Queue, args: argparse.Namespace) -> Iterator[int]:
    """The ids `jobq retry` acts on: those given, or every job of --status (and --type)."""
    if args.ids:
        if args.status is not None or args.job_type is not None:
            raise CommandError("give job ids or --status (with --type), not both")
        yield from job_ids(args.ids)
        return
    if args.status is None:
        raise CommandError("give job ids, or --status to retry every job with that status")
    if args.status not in RETRYABLE_STATUSES:
        names = ", ".join(map(str, RETRYABLE_STATUSES))
        raise CommandError(f"only {names} jobs can be retried, not {args.status}")
    before = None
    while page := queue.jobs(
        status=args.status, type=args.job_type, limit=RETRY_PAGE, before_id=before
    ):
        yield from (record.id for record in page)
        before = page[-1].id


def cmd_retry(queue: Queue, args: argparse.Namespace) -> int:
    retried = refused = 0
    for number in chosen(queue, args):
        if queue.retry(number):
            retried += 1
            continue
        refused += 1
        why = why_not_retried(number, queue.get(number), queue)
        print(f"jobq: job {number} not retried: {escaped(why)}", file=sys.stderr)
    print(f"jobq: retried {retried} job(s)")
    return 1 if refused else 0


def type_name(text: str) -> str:
    try:
        check_type_name(text)
    except ValueError as error:
        raise CommandError(str(error)) from None
    return text


def cmd_pause(queue: Queue, args: argparse.Namespace) -> int:
    name = type_name(args.type)
    # A misspelt type would be paused as readily as a real one, and nothing would say so.
    if not args.force and not queue.knows_type(name):
        raise CommandError(
            f"no job of type {name!r} exists: not paused (check the name, or give --force to "
            "pause a type not yet enqueued)"
        )
    done = queue.pause(name)
    print(f"jobq: type {name!r} {'paused' if done else 'was paused already'}")
    return 0


def cmd_resume(queue: Queue, args: argparse.Namespace) -> int:
    name = type_name(args.type)
    done = queue.resume(name)
    print(f"jobq: type {name!r} {'resumed' if done else 'was not paused'}")
    return 0
