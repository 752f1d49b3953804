"""PostgreSQL's schema for jobq: the jobs table, its indexes, and the function claims probe
the ready indexes through. Versions are applied in order by Backend.install()."""

from __future__ import annotations

from ..shapes import FIRST_INDEXES

# A pending job that may run now. Claims probe for it; metrics read its age.
READY = (
    "status = 'pending' AND scheduled_at <= now() "
    "AND (deadline IS NULL OR deadline > now()) AND attempts < max_attempts"
)

# Said only by claims of any type, and part of the predicate of the index they walk, so
# that no claim by type can walk that index. Every job has max_attempts >= 1, so it selects
# nothing away. Without it, statistics taken while one type filled the table (or none yet)
# make PostgreSQL expect that type everywhere; it then walks the untyped index in schedule
# order, past every row of the other types, rather than the typed one: seconds per claim
# behind a large backlog of another type.
ANY_TYPE = "max_attempts > 0"

# Version 2's probe and function, as that migration created them: a migration never
# changes once released. Version 3 replaces the function (see NEXT_READY).
PROBE_V2 = (
    f"SELECT id, scheduled_at FROM jobq_jobs WHERE {READY} AND {{which}} "
    "ORDER BY scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED"
)

# The probes run inside a function, planned without sorts. On a table never analyzed, or
# analyzed before a burst, PostgreSQL's estimate of the ready rows multiplies default
# selectivities down to one or two, and it then prefers to read them all through a bitmap
# scan and sort them over walking an ordered index: a sort of every ready row per claim
# (50 ms at 50,000 jobs). No sort leaves only the ordered walk. A function's own settings
# hold for its statements alone and within one transaction, so a transaction pooler may
# share the server connection freely.
# (The functions also run without JIT since a later version: see NO_JIT. A function made
# again must say both.)
PROBE_SETTINGS = {"enable_sort": "off"}
SETTINGS = " ".join(f"SET {name} = {value}" for name, value in PROBE_SETTINGS.items())

NEXT_READY_V2 = f"""
    CREATE OR REPLACE FUNCTION jobq_next_ready(job_type text)
    RETURNS TABLE (id bigint, scheduled_at timestamptz)
    LANGUAGE plpgsql VOLATILE
    {SETTINGS}
    AS $$
    #variable_conflict use_column
    BEGIN
        IF job_type IS NULL THEN
            RETURN QUERY {PROBE_V2.format(which=ANY_TYPE)};
        ELSE
            RETURN QUERY {PROBE_V2.format(which="type = job_type")};
        END IF;
    END
    $$
"""

# One probe for the next ready row, highest priority first, then in schedule order: `{which}`
# is UNPAUSED or a condition on the type. The ready indexes lead with the priority, so this
# is still a walk that stops at its first row. (A claim steps over the pending rows of a
# higher priority that are scheduled later: delayed jobs at a raised priority cost claims
# a little, which the README says.)
PROBE = (
    f"SELECT id, priority, scheduled_at FROM jobq_jobs WHERE {READY} AND {{which}} "
    "ORDER BY priority DESC, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED"
)

# A claim of any type skips the rows of paused types as it walks; a claim by type asks once,
# before it probes, whether its type is paused.
UNPAUSED = f"{ANY_TYPE} AND NOT EXISTS (SELECT FROM jobq_paused p WHERE p.type = jobq_jobs.type)"

# Dropped first: a function's result columns cannot change in place. Callers name the
# columns they read, so a worker of the previous release reads this one unchanged.
NEXT_READY = f"""
    CREATE FUNCTION jobq_next_ready(job_type text)
    RETURNS TABLE (id bigint, priority smallint, scheduled_at timestamptz)
    LANGUAGE plpgsql VOLATILE
    {SETTINGS}
    AS $$
    #variable_conflict use_column
    BEGIN
        IF job_type IS NULL THEN
            RETURN QUERY {PROBE.format(which=UNPAUSED)};
        ELSIF NOT EXISTS (SELECT FROM jobq_paused p WHERE p.type = job_type) THEN
            RETURN QUERY {PROBE.format(which="type = job_type")};
        END IF;
    END
    $$
"""

STATUSES_V3 = "'pending', 'in_progress', 'completed', 'failed', 'expired', 'cancelled'"

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE IF NOT EXISTS jobq_jobs (
            id           bigserial PRIMARY KEY,
            type         text NOT NULL,
            class_name   text NOT NULL,
            payload      text NOT NULL,
            status       text NOT NULL DEFAULT 'pending',
            attempts     integer NOT NULL DEFAULT 0,
            max_attempts integer NOT NULL,
            backoff      double precision NOT NULL,
            max_backoff  double precision NOT NULL,
            jitter       boolean NOT NULL,
            token        text,
            lease_until  timestamptz,
            scheduled_at timestamptz NOT NULL,
            deadline     timestamptz,
            last_error   text,
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now(),
            finished_at  timestamptz,
            CONSTRAINT jobq_jobs_status_check CHECK
                (status IN ('pending', 'in_progress', 'completed', 'failed', 'expired'))
        )
        """,
        *FIRST_INDEXES,
    ),
    (
        # Claims of any type walk this one; see ANY_TYPE for why it replaces jobq_jobs_ready.
        f"CREATE INDEX IF NOT EXISTS jobq_jobs_ready_any ON jobq_jobs (scheduled_at, id) "
        f"WHERE status = 'pending' AND {ANY_TYPE}",
        "DROP INDEX IF EXISTS jobq_jobs_ready",
        NEXT_READY_V2,
        # A queue table turns over all its rows again and again. At the default scale factors
        # (vacuum at 20% dead rows, analyze at 10% changed) a table of a million rows waits for
        # 200,000 dead versions before vacuum, and claims step over their index entries at the
        # head of the ready indexes; a burst of inserts waits as long for fresh statistics.
        "ALTER TABLE jobq_jobs SET (autovacuum_vacuum_scale_factor = 0.01, "
        "autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02)",
    ),
    (
        # Priority, the cancelled status, where an attempt runs and whether it was asked to
        # stop. Adding a column with a constant default rewrites no rows.
        "ALTER TABLE jobq_jobs ADD COLUMN priority smallint NOT NULL DEFAULT 0 "
        "CONSTRAINT jobq_jobs_priority_check CHECK (priority BETWEEN -1000 AND 1000), "
        "ADD COLUMN host text, ADD COLUMN pid integer, "
        "ADD COLUMN cancel_requested_at timestamptz, "
        "DROP CONSTRAINT jobq_jobs_status_check, "
        f"ADD CONSTRAINT jobq_jobs_status_check CHECK (status IN ({STATUSES_V3}))",
        # The ready indexes again, under their names, now led by the priority.
        "DROP INDEX jobq_jobs_ready_any",
        "CREATE INDEX jobq_jobs_ready_any ON jobq_jobs (priority DESC, scheduled_at, id) "
        f"WHERE status = 'pending' AND {ANY_TYPE}",
        "DROP INDEX jobq_jobs_ready_by_type",
        "CREATE INDEX jobq_jobs_ready_by_type ON jobq_jobs (type, priority DESC, scheduled_at, id) "
        "WHERE status = 'pending'",
        "CREATE TABLE jobq_paused (type text PRIMARY KEY, "
        "paused_at timestamptz NOT NULL DEFAULT now())",
        "DROP FUNCTION jobq_next_ready(text)",
        NEXT_READY,
    ),
)

# The probe functions, with the setting each claim's probe runs under from this version on.
PROBES = ("jobq_next_ready(text)", "jobq_ready_many(text, integer)")

# No JIT for the probes. The planner costs a probe as a walk of every ready row (it stops at
# its first, but the estimate cannot know where that is), and the cost grows with the table:
# 148,000 at 1,000,000 jobs, past jit_above_cost (100,000). Every claim then compiled its
# probe: 50 ms of JIT against 0.07 ms for the walk, and 8 workers behind 1,000,000 jobs
# drained at 114 jobs/s with 13 ms of PostgreSQL CPU per job (0.44 ms without JIT).
NO_JIT: tuple[str, ...] = tuple(f"ALTER FUNCTION {probe} SET jit = off" for probe in PROBES)

# The worker incarnation that made each claim (see running.worker_id). A supervisor settles
# a dead child's rows by it; that reads only in-progress rows, through jobq_jobs_leases, so
# no index of its own weighs on claims. A column with no default rewrites no rows.
WORKER_IDS: tuple[str, ...] = ("ALTER TABLE jobq_jobs ADD COLUMN worker text",)

# The W3C trace context of the enqueue that traced the job (see jobq/tracing.py), which each
# claim reads back for the attempt's span. NULL for every row enqueued untraced: no rewrite.
TRACE_CONTEXT: tuple[str, ...] = (
    "ALTER TABLE jobq_jobs ADD COLUMN traceparent text, ADD COLUMN tracestate text",
)


def in_progress(alias: str = "") -> str:
    """The condition that a row's attempt is in progress, in a form no index's predicate
    matches: checked on the rows a statement about given attempts (an acknowledgement, a
    failure, a release, a renewal, a progress write) finds by primary key. Written plainly,
    it let the planner read every attempt in progress from the leases index (partial on
    it, and small) and filter them for the few acknowledged: 400 rows read for one
    acknowledgement at 400 in progress, and a batch's whole prefetch in a drain. (The status
    is never NULL: the coalesce changes nothing but the plan.)"""
    return f"coalesce({alias}status, '') = 'in_progress'"
