"""`jobq jobs`, `show`, `cancel`, `retry`, `pause` and `resume`, run in-process on every
database: what they print, what they change, and one clear line with exit 1 for bad input."""

from __future__ import annotations

import json
import logging

import pytest

import jobq
from jobq.cli.commands import main
from jobq.cli.controls import RECORD_KEYS, SHOW_KEYS
from jobq.queue.running import worker_id
from tests.support.jobs import Boom, Limited, Noop, Record

ONCE = jobq.RetryPolicy(max_attempts=1)


@pytest.fixture
def jobq_(dsn: str, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run `jobq ARGS --dsn DSN`: (exit code, stdout, stderr). main() points jobq's logger
    at this test's captured stderr; it is put back as it was afterwards, so that no later
    test logs to a stream already closed."""
    logger = logging.getLogger("jobq")
    saved = (logger.handlers[:], logger.level, logger.propagate)

    def run(*args: str) -> tuple[int, str, str]:
        code = main([*args, "--dsn", dsn])
        out, err = capsys.readouterr()
        return code, out, err

    yield run
    logger.handlers[:], logger.level, logger.propagate = saved


def test_jobs_lists_newest_first_as_text_and_stable_json(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    first = queue.enqueue(Noop(), priority=3)
    second = queue.enqueue(Noop(), type="mail")
    claim = queue.claim("mail")
    assert claim is not None
    code, out, _ = jobq_("jobs")
    header, *rows = out.splitlines()
    assert code == 0
    assert header.split()[:4] == ["id", "type", "status", "priority"]
    assert [row.split()[0] for row in rows] == [str(second), str(first)]
    assert "in_progress" in rows[0]
    assert ":" in rows[0].split()[-1]  # host:pid
    code, out, _ = jobq_("jobs", "--json", "--type", "noop", "--limit", "5")
    (shown,) = json.loads(out)
    assert tuple(shown) == RECORD_KEYS
    assert (shown["id"], shown["priority"], shown["status"], shown["host"]) == (
        first,
        3,
        "pending",
        None,
    )
    code, out, _ = jobq_("jobs", "--json", "--status", "in_progress")
    assert [job["id"] for job in json.loads(out)] == [second]
    # The claim names the worker incarnation that made it: this process.
    code, out, _ = jobq_("show", str(second), "--json")
    assert json.loads(out)["worker"] == worker_id()
    assert "worker" in jobq_("show", str(second))[1]


def test_show_prints_one_job_or_one_line_why_not(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    job = queue.enqueue(Noop(), priority=-2, unique_key="import:customer-42")
    code, out, _ = jobq_("show", str(job), "--json")
    shown = json.loads(out)
    assert code == 0
    assert (shown["priority"], shown["unique_key"]) == (-2, "import:customer-42")
    code, out, _ = jobq_("show", str(job))
    assert code == 0
    assert "priority" in out
    assert "pending" in out
    for bad, message in [(str(job + 99), "no job with id"), ("x1", "not a job id: 'x1'")]:
        code, out, err = jobq_("show", bad)
        assert (code, out) == (1, "")
        assert err.count("\n") == 1
        assert message in err


def test_show_and_jobs_tell_a_claimed_job_from_a_running_one(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    # A prefetching worker's batch: the first runs, the second waits in its queue.
    running, claimed = queue.enqueue_many([Noop(), Noop()])
    assert [claim.id for claim in queue.claim_many(2, queued=True)] == [running, claimed]
    _, out, _ = jobq_("show", str(claimed))
    assert "in_progress (claimed, not started)" in out
    _, out, _ = jobq_("show", str(running))
    assert "in_progress" in out
    assert "not started" not in out
    shown = json.loads(jobq_("show", str(claimed), "--json")[1])
    assert (shown["status"], shown["attempted_at"]) == ("in_progress", None)
    _, out, _ = jobq_("jobs", "--status", "in_progress")
    assert out.count("(claimed, not started)") == 1


def test_cancel_acts_on_every_id_and_says_which_it_refused(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    done, running, pending = queue.enqueue_many([Noop(), Noop(), Noop()])
    queue.process_jobs(1)  # the first
    assert queue.claim() is not None  # the second, running
    code, out, err = jobq_("cancel", str(running), str(done), str(pending), str(done + 50))
    assert code == 1
    assert f"job {running} is being cancelled" in out
    assert f"job {pending} cancelled" in out
    assert err.splitlines() == [
        f"jobq: job {done} not cancelled: it is completed already",
        f"jobq: job {done + 50} not cancelled: no such job",
    ]
    assert queue.counts() == {"completed": 1, "in_progress": 1, "cancelled": 1}


def test_retry_by_id_or_by_status_and_type(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    failed = [queue.enqueue(Boom(), retry=ONCE) for _ in range(3)]
    other = queue.enqueue(Boom(), type="other", retry=ONCE)
    queue.process_jobs(10)
    code, out, err = jobq_("retry", str(failed[0]), str(failed[0]))
    assert code == 1
    assert "retried 1 job(s)" in out
    assert f"job {failed[0]} is pending" in err
    code, out, _ = jobq_("retry", "--status", "failed", "--type", "boom")
    assert code == 0
    assert "retried 2 job(s)" in out
    assert queue.counts("boom") == {"pending": 3}
    assert queue.counts("other") == {"failed": 1}
    code, out, err = jobq_("retry", "--status", "pending")
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert "can be retried" in err
    code, out, err = jobq_("retry", str(other), "--status", "failed")
    assert code == 1
    assert "not both" in err
    record = queue.get(other)
    assert record is not None
    assert record.status == "failed"


def test_retry_by_status_goes_on_past_a_job_whose_key_is_held(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    failed = [queue.enqueue(Boom(), retry=ONCE, unique_key=f"k{i}") for i in range(3)]
    queue.process_jobs(10)
    holder = queue.enqueue(Noop(), unique_key="k1")
    code, out, err = jobq_("retry", "--status", "failed")
    assert code == 1, err
    assert "retried 2 job(s)" in out
    assert f"job {failed[1]} not retried: job {holder} holds its unique key 'k1'" in err
    assert queue.counts("boom") == {"pending": 2, "failed": 1}


def test_pause_and_resume_a_type(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    queue.enqueue(Noop())
    assert jobq_("pause", "noop")[:2] == (0, "jobq: type 'noop' paused\n")
    assert jobq_("pause", "noop")[1] == "jobq: type 'noop' was paused already\n"
    assert queue.paused() == {"noop"}
    assert queue.claim() is None
    assert jobq_("resume", "noop")[:2] == (0, "jobq: type 'noop' resumed\n")
    assert queue.claim() is not None
    code, out, err = jobq_("pause", "")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1


def test_jobs_shows_cancelling_only_while_the_cancelled_job_still_runs(  # type: ignore[no-untyped-def]
    queue: jobq.Queue, jobq_
) -> None:
    running, waiting = queue.enqueue_many([Noop(), Noop()])
    claim = queue.claim()
    assert claim is not None
    assert claim.id == running
    assert queue.cancel(running)
    assert queue.cancel(waiting)

    def rows() -> dict[int, str]:
        code, out, _ = jobq_("jobs")
        assert code == 0
        return {int(row.split()[0]): row for row in out.splitlines()[1:]}

    shown = rows()
    assert "in_progress (cancelling)" in shown[running]
    assert shown[waiting].split()[2] == "cancelled"
    assert "cancelling" not in shown[waiting]
    assert queue.run(claim) is jobq.Outcome.CANCELLED
    ended = rows()[running]
    assert ended.split()[2] == "cancelled"
    assert "cancelling" not in ended


def test_cancel_checks_every_id_first_and_does_nothing_if_one_is_malformed(  # type: ignore[no-untyped-def]
    queue: jobq.Queue, jobq_
) -> None:
    job = queue.enqueue(Noop())
    code, out, err = jobq_("cancel", str(job), "0", "-5", "x", "99999")
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "jobq: not a job id: '0'",
        "jobq: not a job id: '-5'",
        "jobq: not a job id: 'x'",
        "jobq: nothing done: 3 of the 5 arguments are not job ids",
    ]
    assert queue.counts() == {"pending": 1}
    code, out, err = jobq_("cancel", "99999", str(job), "99998")
    assert (code, out) == (1, f"jobq: job {job} cancelled\n")
    assert err.splitlines() == [
        "jobq: job 99999 not cancelled: no such job",
        "jobq: job 99998 not cancelled: no such job",
    ]
    assert queue.counts() == {"cancelled": 1}


def test_retry_checks_every_id_first_and_does_nothing_if_one_is_malformed(  # type: ignore[no-untyped-def]
    queue: jobq.Queue, jobq_
) -> None:
    failed = queue.enqueue(Boom(), retry=ONCE)
    queue.process_jobs(1)
    code, out, err = jobq_("retry", str(failed), "1e3", "0")
    assert (code, out) == (1, "")
    assert err.splitlines()[:2] == ["jobq: not a job id: '1e3'", "jobq: not a job id: '0'"]
    assert queue.counts() == {"failed": 1}
    code, out, err = jobq_("retry", "99999", str(failed))
    assert (code, out) == (1, "jobq: retried 1 job(s)\n")
    assert err.splitlines() == ["jobq: job 99999 not retried: no job with id 99999"]
    assert queue.counts() == {"pending": 1}


def test_pausing_a_type_no_job_has_needs_force(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    code, out, err = jobq_("pause", "nosuch")
    assert (code, out) == (1, "")
    assert err == (
        "jobq: no job of type 'nosuch' exists: not paused (check the name, or give --force "
        "to pause a type not yet enqueued)\n"
    )
    assert queue.paused() == set()
    assert jobq_("pause", "nosuch", "--force")[:2] == (0, "jobq: type 'nosuch' paused\n")
    assert queue.paused() == {"nosuch"}
    assert jobq_("pause", "nosuch")[:2] == (0, "jobq: type 'nosuch' was paused already\n")
    # A type some job has, finished or not, needs no --force; nor one a Job class declares.
    queue.enqueue(Noop(), type="known")
    queue.process_jobs(1)
    assert jobq_("pause", "known")[:2] == (0, "jobq: type 'known' paused\n")
    assert jobq_("pause", Record.type)[:2] == (0, "jobq: type 'record' paused\n")


def test_show_json_gives_the_payload_decoded(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    job = queue.enqueue(Record({"customer": "acme", "ids": [1, 2]}))
    code, out, _ = jobq_("show", str(job), "--json")
    shown = json.loads(out)
    assert code == 0
    assert shown["payload"] == {"value": {"customer": "acme", "ids": [1, 2]}}
    assert tuple(shown) == SHOW_KEYS
    assert (shown["concurrency_key"], shown["waits_on"]) == (None, None)
    code, out, _ = jobq_("jobs", "--json")
    assert json.loads(out)[0]["payload"] == shown["payload"]
    code, out, _ = jobq_("show", str(job))
    assert ["payload", '{"value":{"customer":"acme","ids":[1,2]}}'] in [
        line.split() for line in out.splitlines()
    ]


@pytest.mark.databases("sqlite")
def test_limits_are_listed_overridden_and_what_waits_shown(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    ids = [queue.enqueue(Limited("a", i)) for i in range(4)]
    assert len(queue.claim_many(4)) == 2
    code, out, _ = jobq_("limits")
    assert code == 0
    assert out.splitlines()[1].split() == ["limited", "concurrency", "2", "2", "2", "2"]
    code, out, _ = jobq_("jobs", "--blocked")
    assert [row.split()[0] for row in out.splitlines()[1:]] == [str(ids[3]), str(ids[2])]
    code, out, _ = jobq_("show", str(ids[3]), "--json")
    shown = json.loads(out)
    assert (shown["concurrency_key"], shown["waits_on"]) == ("a", "concurrency")
    assert jobq_("limit", "limited", "--concurrency", "3")[0] == 0
    code, out, _ = jobq_("limits", "--json")
    assert json.loads(out)[0] | {"in_use": None} == {
        "type": "limited",
        "limit": "concurrency",
        "in_force": 3,
        "declared": 2,
        "override": 3,
        "per": None,
        "in_use": None,
        "blocked": 0,
    }
    code, _, err = jobq_("limit", "limited", "--concurrency", "0")
    assert (code, err.strip()) == (
        1,
        "jobq: --concurrency: a limit's concurrency must be a whole number from 1 to 1000000, "
        "got 0",
    )
    assert jobq_("limit", "limited")[0] == 1
    assert jobq_("limit", "limited", "--clear")[0] == 0
    assert queue.limits()[0].in_force == 2
    assert jobq_("limit", "limited", "--rate", "5/60")[0] == 0
    assert [(row.name, row.in_force, row.per) for row in queue.limits()] == [
        ("concurrency", 2, None),
        ("rate", 5, 60),
    ]
    code, _, err = jobq_("limit", "limited", "--rate", "5")
    assert (code, err.strip()) == (
        1,
        "jobq: --rate: a rate is N/SECONDS, e.g. 10/60 for 10 starts a minute, got '5'",
    )


@pytest.mark.databases("sqlite")
def test_show_lists_parents_and_dependents(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    parents = queue.enqueue_many([Noop(), Noop()])
    child = queue.enqueue(Noop(), after=parents)
    code, out, _ = jobq_("show", str(child), "--json")
    shown = json.loads(out)
    assert (code, shown["status"], shown["parents"], shown["dependents"]) == (
        0,
        "waiting",
        parents,
        [],
    )
    code, out, _ = jobq_("show", str(parents[0]))
    assert ["dependents", str(child)] in [line.split() for line in out.splitlines()]


@pytest.mark.databases("sqlite")
def test_show_and_retry_tell_what_a_dependent_s_retry_waits_for(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    parent = queue.enqueue(Boom(), retry=jobq.RetryPolicy(max_attempts=1))
    child = queue.enqueue(Noop(), after=[parent])
    assert queue.cancel(child)
    code, out, _ = jobq_("show", str(child), "--json")
    assert json.loads(out)["on_retry"] == f"waits again for job(s) {parent}"

    assert queue.process_jobs(1) == 1
    code, out, _ = jobq_("show", str(child))
    assert f"on_retry             refused: job {child} waits for job {parent}" in out, out
    code, _, err = jobq_("retry", str(child))
    assert (code, err) == (
        1,
        f"jobq: job {child} not retried: job {child} waits for job {parent}, which ended "
        f"failed; retry job {parent} first (the dependents its ending cancelled come back "
        "with it)\n",
    )


@pytest.mark.databases("sqlite")
def test_jobs_and_cancel_take_a_batch(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    with queue.batch(then=Noop()) as batch:
        members = batch.enqueue_many([Noop(), Noop()])
    queue.enqueue(Noop())
    code, out, _ = jobq_("jobs", "--batch", str(batch.id), "--json")
    assert (code, [job["id"] for job in json.loads(out)]) == (0, members[::-1])
    code, out, _ = jobq_("cancel", "--batch", str(batch.id))
    assert (code, out) == (
        0,
        f"jobq: batch {batch.id}: 2 unfinished member(s) cancelled or stopping\n",
    )
    assert queue.batch_status(batch.id)["cancelled"] == 2
    record = queue.get(batch.id)
    assert record is not None
    assert record.status is jobq.Status.PENDING
    assert jobq_("cancel", "--batch", str(batch.id), "1")[0] == 1


# Clear the screen, set the window's title, ring the bell; and an 8-bit CSI, a DEL and a CR.
ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m\x7f\r"
CONTROLS = {"\x1b", "\x07", "\x9b", "\x7f", "\r"}


def test_control_characters_from_the_database_are_printed_escaped(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    evil = f"mail{ESCAPES}"
    job_id = queue.enqueue(Boom(f"line one{ESCAPES}\nline two"), type=evil, retry=ONCE)
    assert queue.process_jobs(1, type=evil) == 1
    commands = {"show": ["show", str(job_id)], "jobs": ["jobs"], "stats": ["stats"]}
    written = {name: jobq_(*argv)[1] for name, argv in commands.items()}
    for name, out in written.items():
        assert not CONTROLS & set(out), (name, out)
        assert "mail\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\x7f\\x0d" in out, (name, out)
    # A traceback keeps its lines.
    assert "line one\\x1b[2J" in written["show"]
    assert "\nline two" in written["show"]
    for name, argv in commands.items():
        out = jobq_(*argv, "--json")[1]
        assert not CONTROLS & set(out), (name, out)
        assert json.dumps(evil) in out  # as JSON escapes, read back as they were
