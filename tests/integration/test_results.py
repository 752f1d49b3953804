"""What handle() returns is stored with its completion, on every path that acknowledges one;
a failure keeps its exception's class; progress and checkpoints are written only by the
attempt that holds the job; and the attempt history has one entry per attempt."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

import jobq
from jobq.attempt_log import Progress
from jobq.hooks import JobHooks
from jobq.queue import progress
from jobq.results import RESULT_LIMIT
from tests.support.result_jobs import Answer, Resume, ResumeAsync, Unstorable
from tests.support.waiting import wait_for, wait_lease_ended


def same_moment(column: datetime | None, entry: datetime | None) -> bool:
    """A column's time and the history's Unix seconds of it, which JSON may round by a
    microsecond or so."""
    assert column is not None
    assert entry is not None
    return abs(column - entry) < timedelta(milliseconds=1)


NESTED = {"ü": ["ß", 1, 2.5, None, True, {"deep": [{"er": "日本"}]}], "empty": {}}
# What an array literal must quote (PostgreSQL binds a batch's results as one).
AWKWARD = {"say": 'a "quoted", back\\slash {brace} NULL', "": [None, "NULL", "", '\\"']}
BATCHED = [[1, [2, [3]]], "x" * 1000, AWKWARD, None, "NULL"]


def test_results_round_trip_on_every_acknowledgement_path(queue: jobq.Queue) -> None:
    # run(): complete(); process_jobs(): complete_and_claim(); a batch:
    # complete_many_and_claim().
    alone = queue.enqueue(Answer("é"))
    claim = queue.claim()
    assert claim is not None
    assert queue.run(claim) is jobq.Outcome.COMPLETED
    chained = [queue.enqueue(Answer(value)) for value in (NESTED, 0, None)]
    assert queue.process_jobs(3) == 3
    batched = [queue.enqueue(Answer(value)) for value in BATCHED]
    claims = queue.claim_many(len(BATCHED))
    completed = [queue.run_unacknowledged(claim) for claim in claims]
    assert all(isinstance(claim, jobq.ClaimedJob) for claim in completed)
    outcomes, _ = queue.complete_many_and_claim(completed, 0)  # type: ignore[arg-type]
    assert outcomes == [jobq.Outcome.COMPLETED] * len(BATCHED)

    results = {job_id: queue.wait(job_id, timeout=0).result for job_id in [alone, *chained]}
    assert results == {alone: "é", chained[0]: NESTED, chained[1]: 0, chained[2]: None}
    assert [queue.wait(job_id).result for job_id in batched] == BATCHED
    record = queue.wait(alone)
    assert record.error_class is None
    assert record.error_traceback is None
    assert [entry.attempt for entry in record.history] == [1]
    assert record.history[0].error is None
    assert record.started_at == record.attempted_at
    assert same_moment(record.started_at, record.history[0].started_at)
    assert record.history[0].worker is not None
    # Listed jobs carry their results too.
    listed = {record.id: record.result for record in queue.jobs(type="answer")}
    assert listed[chained[0]] == NESTED


def test_a_coroutine_job_runs_to_its_end_where_no_event_loop_runs_attempts(
    queue: jobq.Queue,
) -> None:
    # process_jobs, as a process worker: the coroutine is awaited, in the attempt's frame.
    job_id = queue.enqueue(ResumeAsync(2, fail_at=99))
    assert queue.process_jobs(1) == 1
    record = queue.wait(job_id, timeout=0)
    assert record.status is jobq.Status.COMPLETED
    assert record.result == {"from": 0, "attempt": 1}
    assert record.progress == Progress(2, 2, "rows")  # written from inside the coroutine


def test_a_result_that_cannot_be_stored_fails_the_attempt_and_stores_nothing(
    queue: jobq.Queue,
) -> None:
    retry = jobq.RetryPolicy(max_attempts=1)
    ids = [queue.enqueue(Unstorable(size), retry=retry) for size in (0, RESULT_LIMIT - 1)]
    fits = queue.enqueue(Unstorable(RESULT_LIMIT - 2))  # with its quotes, exactly the limit
    assert queue.process_jobs(3) == 3
    unencodable, too_large = (queue.wait(job_id) for job_id in ids)
    assert unencodable.status is jobq.Status.FAILED
    assert unencodable.result is None
    assert "the result cannot be stored as JSON" in (unencodable.last_error or "")
    assert unencodable.error_class == "jobq.results.ResultError"
    assert too_large.status is jobq.Status.FAILED
    assert too_large.result is None
    assert f"over the limit of {RESULT_LIMIT}" in (too_large.last_error or "")
    assert queue.wait(fits).result == "x" * (RESULT_LIMIT - 2)


def test_a_retried_job_resumes_from_its_checkpoint_and_completing_clears_it(
    queue: jobq.Queue,
) -> None:
    job_id = queue.enqueue(Resume(rows=5, fail_at=3), retry=jobq.RetryPolicy(backoff=0))
    assert queue.process_jobs(1) == 1
    failed = queue.get(job_id)
    assert failed is not None
    assert failed.status is jobq.Status.PENDING
    assert failed.checkpoint == {"row": 3}
    assert failed.progress == Progress(3, 5, "rows")
    assert failed.error_class == "builtins.RuntimeError"
    assert failed.error_traceback is not None
    assert failed.error_traceback.endswith("RuntimeError: stopped at row 3")

    assert queue.process_jobs(1) == 1
    done = queue.wait(job_id, timeout=0)
    assert done.result == {"from": 3, "attempt": 2}
    assert done.checkpoint is None
    assert done.progress == Progress(5, 5, "rows")
    # One entry per attempt: the failed one's error and class, then the completed one.
    first, second = done.history
    assert (first.attempt, second.attempt) == (1, 2)
    assert first.error_class == "builtins.RuntimeError"
    assert first.traceback is not None
    assert "stopped at row 3" in first.traceback
    assert second.error is None
    assert second.traceback is None
    assert first.finished_at is not None
    assert second.started_at is not None
    assert first.finished_at <= second.started_at
    assert same_moment(done.started_at, first.started_at)
    assert same_moment(done.attempted_at, second.started_at)


@pytest.mark.lease(0.5)
def test_only_the_attempt_holding_the_job_writes_its_progress_and_checkpoint(
    queue: jobq.Queue,
) -> None:
    job_id = queue.enqueue(Answer(1), retry=jobq.RetryPolicy(backoff=0))
    old = queue.claim()
    assert old is not None
    backend = queue.backend
    assert backend.attempt_write("checkpoint", job_id, old.token, '{"by":"old"}')
    assert backend.attempt_write("progress", job_id, "another", '{"done":1}') is False
    # Fenced: the lease ended, nobody took the job yet.
    wait_lease_ended(queue, job_id)
    assert backend.attempt_write("progress", job_id, old.token, '{"done":9}') is False
    queue.run_maintenance()
    new = queue.claim()
    assert new is not None
    assert new.checkpoint == {"by": "old"}
    assert backend.attempt_write("checkpoint", job_id, new.token, '{"by":"new"}')
    # Superseded: the job is another attempt's.
    assert backend.attempt_write("checkpoint", job_id, old.token, '{"by":"old"}') is False
    record = queue.get(job_id)
    assert record is not None
    assert record.checkpoint == {"by": "new"}
    assert record.progress is None


def test_progress_and_checkpoint_refuse_bad_values_and_work_only_in_a_job() -> None:
    with pytest.raises(RuntimeError, match="progress\\(\\) is for a job's handle"):
        jobq.progress(1)
    with pytest.raises(RuntimeError, match="checkpoint\\(\\) is for a job's handle"):
        jobq.checkpoint({})


def test_wait_times_out_on_a_job_nobody_runs_and_refuses_an_unknown_id(
    queue: jobq.Queue,
) -> None:
    job_id = queue.enqueue(Answer(1))
    with pytest.raises(TimeoutError, match=f"job {job_id} is still pending"):
        queue.wait(job_id, timeout=0.2)
    with pytest.raises(LookupError, match="no job with id 999"):
        queue.wait(999, timeout=1)
    with pytest.raises(ValueError, match="timeout must be"):
        queue.wait(job_id, timeout=-1)


class Seen(jobq.Listener):
    def __init__(self) -> None:
        self.results: list[str | None] = []

    def on_completed(self, claim: jobq.ClaimedJob) -> None:
        self.results.append(claim.result)


def test_a_listener_sees_the_result_on_completion(dsn: str) -> None:
    seen = Seen()
    with jobq.Queue.connect(dsn, listener=seen) as queue:
        queue.install()
        queue.enqueue(Answer({"n": 1}))
        queue.enqueue(Answer(None))
        assert queue.process_jobs(2) == 2
    assert seen.results == ['{"n":1}', None]


class Busy(jobq.Job):
    """Reports progress in a tight loop."""

    job_name = "results.Busy"
    type = "answer"

    def handle(self) -> None:
        for n in range(1, 10_001):
            jobq.progress(n, 10_000)


@pytest.mark.databases("sqlite")
def test_progress_in_a_tight_loop_writes_once_then_the_last_value_before_the_outcome(
    queue: jobq.Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "PROGRESS_INTERVAL", 3600.0)
    written: list[str] = []
    queue.backend.connection.set_trace_callback(written.append)
    job_id = queue.enqueue(Busy())
    assert queue.process_jobs(1) == 1
    queue.backend.connection.set_trace_callback(None)
    assert len([sql for sql in written if "SET progress" in sql]) == 2
    record = queue.wait(job_id, timeout=0)
    assert record.progress == Progress(10_000, 10_000)
    # Results and progress live on the row, and go with it: prune takes the rows finished
    # before the database's now, which may still be the instant this job finished.
    assert wait_for("the job to be prunable", lambda: queue.prune(0), 5) == 1
    assert queue.get(job_id) is None


def test_an_attempt_cancelled_as_it_ran_has_its_history_entry_and_no_result(
    queue: jobq.Queue,
) -> None:
    job_id = queue.enqueue(Answer("late"))
    claim = queue.claim()
    assert claim is not None
    assert queue.cancel(job_id)
    assert queue.run(claim) is jobq.Outcome.CANCELLED
    record = queue.wait(job_id, timeout=0)
    assert record.status is jobq.Status.CANCELLED
    assert record.result is None
    (entry,) = record.history
    assert entry.worker is not None
    assert entry.error == record.last_error
    assert entry.error_class is None


class Tagged:
    """A codec whose results are tagged text, not JSON."""

    def __init__(self) -> None:
        self.jobs = jobq.JsonCodec()

    def encode(self, job: jobq.Job) -> tuple[str, str]:
        return self.jobs.encode(job)

    def decode(self, class_name: str, payload: str) -> jobq.Job:
        return self.jobs.decode(class_name, payload)

    def encode_result(self, value: object) -> str:
        return f"tagged:{value!r}"

    def decode_result(self, text: str) -> object:
        return ("decoded", text)


@pytest.mark.databases("sqlite")
def test_a_codec_that_encodes_results_encodes_them_and_hooks_see_them(dsn: str) -> None:
    after: list[tuple[str | None, jobq.Outcome]] = []
    with jobq.Queue.connect(dsn, codec=Tagged()) as queue:
        queue.install()
        queue.hooks = JobHooks(after=[lambda claim, outcome: after.append((claim.result, outcome))])
        job_id = queue.enqueue(Unstorable(0))  # a set: no JSON for it, but this codec takes it
        assert queue.process_jobs(1) == 1
        assert queue.wait(job_id, timeout=0).result == ("decoded", "tagged:{1, 2}")
    assert after == [("tagged:{1, 2}", jobq.Outcome.COMPLETED)]
