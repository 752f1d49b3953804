"""On PostgreSQL, the endings of limited attempts wake their keys' blocked jobs once a
statement (postgresql/limit_endings.py), whatever statement ends them: here one UPDATE the
test makes itself, as an operator's or a migration's would. And a claim of a blocked job, which
only a batched acknowledgement makes (successors.py admits it, for all its keys at once),
runs neither the admit nor the fill; nor does the ending it makes wake anything, as its key
is full again."""

from __future__ import annotations

import psycopg
import pytest

import jobq
from jobq.backends.postgresql.limits import key_lock
from jobq.queue.running import runner
from tests.support.jobs import Limited

pytestmark = pytest.mark.databases("postgresql")

KEYS = "abcde"


def test_one_statement_ending_attempts_of_five_keys_wakes_the_best_blocked_job_of_each(
    queue: jobq.Queue, dsn: str
) -> None:
    queue.set_limit("limited", 1)
    running = [queue.enqueue(Limited(key, 0), priority=9) for key in KEYS]
    later = [queue.enqueue(Limited(key, 1)) for key in KEYS]
    best = [queue.enqueue(Limited(key, 2), priority=5) for key in KEYS]
    claims = queue.claim_many(5)
    assert sorted(claim.id for claim in claims) == running
    assert queue.claim() is None
    assert len(queue.blocked()) == 10

    with psycopg.connect(dsn) as connection:
        connection.execute("SET LOCAL track_functions = 'all'")
        ended = connection.execute(
            "UPDATE jobq_jobs SET status = 'completed', token = NULL, lease_until = NULL, "
            "finished_at = now() WHERE id = ANY(%s)",
            (running,),
        ).rowcount
        calls = connection.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions "
            "WHERE funcname LIKE 'jobq_limit%%'"
        ).fetchone()
    assert ended == 5
    # Its own UPDATE of the woken rows fires it once more, and it leaves at once.
    assert calls is not None
    assert calls[0] <= 2, f"the limit triggers ran {calls[0]} times"

    assert sorted(job.id for job in queue.blocked()) == later
    woken = queue.claim_many(10)
    assert sorted(claim.id for claim in woken) == best


def test_a_claim_of_a_blocked_job_runs_no_row_trigger(queue: jobq.Queue, dsn: str) -> None:
    blocked = queue.enqueue_many([Limited("a", i) for i in range(3)])[2]
    with psycopg.connect(dsn) as connection:
        connection.execute("SET LOCAL track_functions = 'all'")
        claimed = connection.execute(
            "UPDATE jobq_jobs SET status = 'in_progress', blocked_on = NULL, token = 't', "
            "lease_until = now() + interval '1 minute' WHERE id = %s RETURNING status",
            (blocked,),
        ).fetchone()
        calls: dict[str, int] = dict(
            connection.execute(
                "SELECT funcname, calls FROM pg_stat_xact_user_functions "
                "WHERE funcname LIKE 'jobq_limit%%'"
            ).fetchall()
        )
    assert claimed == ("in_progress",)
    # The attempt takes its number (limit_floors.py), an assignment that runs no query.
    assert calls == {"jobq_limit_endings": 1, "jobq_limit_number": 1}


def test_an_ending_whose_statement_claims_its_key_s_next_job_leaves_the_key_alone(
    queue: jobq.Queue, dsn: str
) -> None:
    # The key's lock held elsewhere, as a claim of the key would: a trigger that counted the
    # key again would wait for it (and fail at the lock timeout).
    queue.set_limit("limited", 1)
    a = queue.enqueue_many([Limited("a", i) for i in range(3)])
    (first,) = queue.claim_many(1)
    with psycopg.connect(dsn) as holder, psycopg.connect(dsn) as connection:
        holder.execute(
            f"SELECT {key_lock('type', 'limit_key')} FROM jobq_jobs WHERE id = %s", (a[0],)
        )
        connection.execute("SET LOCAL lock_timeout = '5s'")
        claimed = connection.execute(
            "WITH done AS (UPDATE jobq_jobs SET status = 'completed', token = NULL, "
            "lease_until = NULL, finished_at = now() WHERE id = %s) "
            "UPDATE jobq_jobs SET status = 'in_progress', blocked_on = NULL, token = 't', "
            "lease_until = now() + interval '1 minute' WHERE id = %s RETURNING id",
            (first.id, a[1]),
        ).fetchall()
    assert claimed == [(a[1],)]
    assert [job.id for job in queue.blocked()] == a[2:]


def test_a_batched_acknowledgement_settles_its_endings_without_the_trigger(
    queue: jobq.Queue,
) -> None:
    # Its key's next job claimed, another key's woken (the batch asked for one job only):
    # the statement does both, and the endings' trigger runs for the next statement of the
    # same transaction again.
    a = queue.enqueue_many([Limited("a", i) for i in range(3)])
    b = queue.enqueue_many([Limited("b", i) for i in range(3)])
    first = queue.claim_many(4)
    assert sorted(claim.id for claim in first) == [*a[:2], *b[:2]]
    functions = "SELECT funcname, calls FROM pg_stat_xact_user_functions"
    with queue.backend.transaction():
        queue.backend.execute("SET LOCAL track_functions = 'all'")
        # The backend's statement itself, which the queue runs in a transaction of its own.
        done = [(claim.id, claim.token, None, 0.0, 0.0) for claim in first]
        _, (second,) = queue.backend.complete_many_and_claim(done, [], ["t"], 60.0, runner())
        by_batch = dict(queue.backend.fetchall(functions))
        queue.backend.execute(
            "UPDATE jobq_jobs SET status = 'completed', token = NULL, lease_until = NULL "
            "WHERE id = %s",
            (second.id,),
        )
        after = dict(queue.backend.fetchall(functions))
    assert second.id in (a[2], b[2])
    assert "jobq_limit_endings" not in by_batch, by_batch
    assert by_batch.get("jobq_wake_blocked") == 1, by_batch
    assert after.get("jobq_limit_endings", 0) >= 1, after
    assert queue.blocked() == []
    (woken,) = queue.claim_many(5)
    assert woken.id == ({a[2], b[2]} - {second.id}).pop()
