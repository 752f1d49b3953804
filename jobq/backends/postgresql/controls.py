"""PostgreSQL's statements for an operator's controls (see controls.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..controls import LAST_ID, NO_ACTIVE_HOLDER, RECORD_COLUMNS, UNFINISHED_COUNTS, Controls
from ..steps import Steps, every, one
from .results import logged
from .schema import READY, SETTINGS, in_progress

# Wakes idle workers: the payload is the job's type.
NOTIFY_CHANNEL = "jobq_jobs"

# The oldest ready job's scheduled_at per type, as (type, oldest), in a handful of index
# probes however many jobs are ready (see Controls.oldest_ready for the steps), in one
# statement: recursive queries skip through the typed ready index, first to each type, then
# to each of its priorities, and a LIMIT 1 probe per (type, priority) finds its first ready
# row in schedule order. A type whose jobs are all scheduled later has oldest NULL.
OLDEST_READY = f"""
    WITH RECURSIVE types (type) AS (
        SELECT (SELECT type FROM jobq_jobs WHERE status = 'pending' ORDER BY type LIMIT 1)
        UNION ALL
        SELECT (SELECT j.type FROM jobq_jobs j WHERE j.status = 'pending' AND j.type > t.type
                ORDER BY j.type LIMIT 1)
        FROM types t WHERE t.type IS NOT NULL
    ), levels (type, priority) AS (
        SELECT t.type, (SELECT j.priority FROM jobq_jobs j
                        WHERE j.status = 'pending' AND j.type = t.type
                        ORDER BY j.priority DESC LIMIT 1)
        FROM types t WHERE t.type IS NOT NULL
        UNION ALL
        SELECT l.type, (SELECT j.priority FROM jobq_jobs j
                        WHERE j.status = 'pending' AND j.type = l.type AND j.priority < l.priority
                        ORDER BY j.priority DESC LIMIT 1)
        FROM levels l WHERE l.priority IS NOT NULL
    )
    SELECT l.type, min((SELECT j.scheduled_at FROM jobq_jobs j
                        WHERE {READY} AND j.type = l.type AND j.priority = l.priority
                        ORDER BY j.scheduled_at LIMIT 1))
    FROM levels l WHERE l.priority IS NOT NULL GROUP BY l.type
"""

# One probe of a filtered jobs list (see Controls.jobs), planned without sorts. Without
# statistics, PostgreSQL expects one row of a status and type, and reads them from the
# smaller typed ready index and sorts them, rather than walking (status, type, id) in
# order: a sort of every pending job of the type. No sort leaves the ordered walks.
NEWEST_QUERY = (
    "SELECT id FROM jobq_jobs WHERE status = job_status AND type = job_type{before} "
    "ORDER BY id DESC LIMIT how_many"
)
NEWEST = f"""
    CREATE FUNCTION jobq_newest(job_status text, job_type text, before_id bigint, how_many integer)
    RETURNS TABLE (id bigint)
    LANGUAGE plpgsql STABLE
    {SETTINGS}
    AS $$
    #variable_conflict use_column
    BEGIN
        IF job_status = 'in_progress' THEN
            RETURN QUERY SELECT r.id FROM jobq_newest_running(job_type, before_id, how_many) r;
        ELSIF before_id IS NULL THEN
            RETURN QUERY {NEWEST_QUERY.format(before="")};
        ELSE
            RETURN QUERY {NEWEST_QUERY.format(before=" AND id < before_id")};
        END IF;
    END
    $$
"""

# The jobs in progress have no entries in the jobs index (see MIGRATION): they are few, and
# read from the leases' partial index and sorted, with sorts allowed again (without them,
# the planner would walk the primary key back through the whole table instead).
NEWEST_RUNNING_QUERY = (
    "SELECT id FROM jobq_jobs WHERE status = 'in_progress' AND type = job_type "
    f"AND id < coalesce(before_id, {LAST_ID}) ORDER BY id DESC LIMIT how_many"
)
NEWEST_RUNNING = f"""
    CREATE FUNCTION jobq_newest_running(job_type text, before_id bigint, how_many integer)
    RETURNS TABLE (id bigint)
    LANGUAGE sql STABLE SET enable_sort = on
    AS $$ {NEWEST_RUNNING_QUERY} $$
"""

# The status page's schema version: the index the jobs list walks, and the oldest-ready
# skip-scan as a function. The function runs it with JIT off: the planner's estimate of a
# recursive query's rows is ten times its first step's, compounded over two steps, which
# puts the statement's cost past jit_above_cost, and compiling it took 50 to 200 ms of a
# query that runs in one.
MIGRATION: tuple[str, ...] = (
    # Filters by status, and by status and type, walk it in id order (see Controls.jobs);
    # the completed jobs, most of the table, are filtered by type as well. Without the jobs
    # in progress: their acknowledgements and renewals look them up by (id, status), and
    # with statistics from before a burst (none in progress) the planner took this index
    # for that, walking the entry of every job that was ever in progress (dead ones too,
    # until vacuum) for each acknowledgement.
    "CREATE INDEX IF NOT EXISTS jobq_jobs_by_status ON jobq_jobs (status, type, id) "
    "WHERE status <> 'in_progress'",
    NEWEST_RUNNING,
    NEWEST,
    f"""
    CREATE FUNCTION jobq_oldest_ready() RETURNS TABLE (type text, oldest timestamptz)
    LANGUAGE sql STABLE SET jit = off
    AS $$ {OLDEST_READY} $$
    """,
)


# The retry, as a function. Its guard (NO_ACTIVE_HOLDER) refuses a key that a committed job
# holds; but a producer may insert the key while the UPDATE runs, unseen by it, and the
# unique index then makes the UPDATE wait for that producer and, once it commits, fail. The
# function makes that a refusal as well, by undoing its own subtransaction only: nothing
# else of the caller's transaction is touched, and no error reaches it. Returns the retried
# job's type, or NULL.
RETRY = f"""
    CREATE FUNCTION jobq_retry(job_id bigint) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
    DECLARE
        retried text;
    BEGIN
        UPDATE jobq_jobs SET status = 'pending', scheduled_at = now(), finished_at = NULL,
            cancel_requested_at = NULL, max_attempts = greatest(max_attempts, attempts + 1),
            updated_at = now()
        WHERE id = job_id AND status IN ('failed', 'expired', 'cancelled')
          AND (deadline IS NULL OR deadline > now())
          AND {NO_ACTIVE_HOLDER}
        RETURNING type INTO retried;
        RETURN retried;
    EXCEPTION WHEN unique_violation THEN
        RETURN NULL;
    END
    $$
"""


class PostgresControls(Controls):
    wake_params: ClassVar[Mapping[str, str]] = {"channel": NOTIFY_CHANNEL}
    # A session's snapshot, a replication slot or a prepared transaction: whichever is the
    # most transactions behind. pg_stat_activity shows another role's sessions' snapshots
    # only to roles with pg_read_all_stats (pg_monitor grants it).
    sql_horizon = """
        SELECT holder, age, backlog FROM (
            SELECT 'pid ' || pid || ' (' || coalesce(nullif(application_name, ''), backend_type)
                   || ', ' || coalesce(state, 'no state') || ')' AS holder,
                   extract(epoch FROM clock_timestamp() - coalesce(xact_start, backend_start))
                   AS age,
                   age(backend_xmin) AS backlog
            FROM pg_stat_activity
            WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
            UNION ALL
            SELECT 'replication slot ' || slot_name, NULL,
                   greatest(age(xmin), age(catalog_xmin))
            FROM pg_replication_slots WHERE coalesce(xmin, catalog_xmin) IS NOT NULL
            UNION ALL
            SELECT 'prepared transaction ' || gid,
                   extract(epoch FROM clock_timestamp() - prepared), age(transaction)
            FROM pg_prepared_xacts
        ) AS holders
        ORDER BY backlog DESC LIMIT 1
    """
    newest_probe = (
        "SELECT id FROM jobq_newest({status}::text, {type}::text, {before_id}::bigint, {limit})"
    )
    sql_get = f"SELECT {RECORD_COLUMNS} FROM jobq_jobs WHERE id = %(id)s"

    sql_jobs = f"""
        SELECT {RECORD_COLUMNS} FROM jobq_jobs
        WHERE id < coalesce(%(before)s::bigint, {LAST_ID})
        ORDER BY id DESC LIMIT %(limit)s
    """

    sql_cancel = """
        UPDATE jobq_jobs SET
            cancel_requested_at = CASE WHEN status = 'in_progress'
                THEN coalesce(cancel_requested_at, now()) END,
            finished_at = CASE WHEN status IN ('pending', 'waiting') THEN now() END,
            status = CASE WHEN status IN ('pending', 'waiting') THEN 'cancelled' ELSE status END,
            updated_at = now()
        WHERE id = %(id)s AND status IN ('pending', 'waiting', 'in_progress')
    """

    sql_end_cancelled = f"""
        UPDATE jobq_jobs SET status = 'cancelled', token = NULL, lease_until = NULL,
            last_error = %(error)s, updated_at = now(), finished_at = now(),
            {logged("%(error)s")}
        WHERE id = %(id)s AND token = %(token)s AND {in_progress()}
          AND cancel_requested_at IS NOT NULL
    """

    sql_cancel_requested = """
        SELECT cancel_requested_at IS NOT NULL FROM jobq_jobs
        WHERE id = %(id)s AND token = %(token)s
    """

    # The job is ready now: it wakes idle workers, as an enqueue does, at the commit.
    sql_retry = """
        SELECT pg_notify(%(channel)s, type) FROM jobq_retry(%(id)s::bigint) AS retried (type)
        WHERE type IS NOT NULL
    """

    sql_pause = "INSERT INTO jobq_paused (type) VALUES (%(type)s) ON CONFLICT DO NOTHING"

    # The wake-up goes out with the commit, as an enqueue's does.
    sql_resume = """
        WITH resumed AS (DELETE FROM jobq_paused WHERE type = %(type)s RETURNING type)
        SELECT count(pg_notify(%(channel)s, type)) FROM resumed
    """

    sql_paused = "SELECT type FROM jobq_paused"

    sql_completions = """
        SELECT floor(extract(epoch FROM now() - finished_at) / 60)::integer AS ago, count(*)
        FROM jobq_jobs
        WHERE finished_at > now() - make_interval(mins => %(minutes)s) AND status = 'completed'
        GROUP BY ago
    """

    sql_endings = """
        SELECT type, status,
               floor(extract(epoch FROM now() - finished_at) / %(bucket)s)::integer AS ago,
               count(*)
        FROM jobq_jobs WHERE finished_at > now() - make_interval(mins => %(minutes)s)
        GROUP BY type, status, ago
    """

    sql_recent_counts = (
        UNFINISHED_COUNTS
        + """
        SELECT type, status, count(*) FROM jobq_jobs
        WHERE finished_at > now() - make_interval(mins => %(minutes)s) GROUP BY type, status
    """
    )

    sql_oldest_ready = """
        SELECT type, extract(epoch FROM now() - oldest) FROM jobq_oldest_ready()
        WHERE oldest IS NOT NULL
    """

    def oldest_ready_steps(self) -> Steps[dict[str, float]]:
        # One statement rather than Controls' probes, one round trip each.
        return {name: float(age) for name, age in (yield from every(self.sql_oldest_ready))}

    def resume_steps(self, job_type: str) -> Steps[bool]:
        row = yield from one(self.sql_resume, {"type": job_type, "channel": NOTIFY_CHANNEL})
        return bool(row[0])
