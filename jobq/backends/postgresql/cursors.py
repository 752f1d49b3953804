"""PostgreSQL's claim cursors: each session's probes start their walk of a ready index where
its last walk found its first row, not at the head of the index.

Why. While any transaction holds an old snapshot (a report, a dump, a session idle in a
transaction, a stale replication slot), vacuum can remove no entry of the ready indexes and
no walk can mark one dead: every job claimed since keeps its entry at the head of the index,
and a walk from the head steps over all of them (and reads each one's row). Measured on
main: after 50,000 jobs ran behind a held snapshot, one claim read 50,002 index entries
(tests/integration/test_held_horizon_claims.py). Jobs are claimed in index order, so those
entries lie before the place the last claim took from; a walk that starts there steps over
only what was claimed after it, by this session and the others, since.

The options the issue weighed, and why this one:
- moving finished jobs out of the table (a history table filled at acknowledgement) does
  not help: the entry that costs is the ready index's, made dead by the claim itself, long
  before the acknowledgement, and a delete leaves the same dead entry as an update;
- partitions truncated or detached by age (PgQ's rotation) wait for the held snapshot too
  (TRUNCATE and DETACH need an exclusive lock the holder's reads conflict with, or leave
  the rows to the snapshot), and partition pruning would put a probe per partition in every
  claim;
- a shared high-water mark in a table is itself a row updated by every claim, whose dead
  versions the held snapshot keeps: a chain every claim would walk instead.
So the cursor is the session's own, kept in a custom setting (set_config, no table, no
write to WAL), one per job type and one for claims of any type. It is only a hint: a
transaction pooler that hands the session to another client, or a rolled-back claim, only
moves where a walk starts, never what a claim may take.

The bound on order. A walk that starts at the cursor cannot see a job placed before it: one
enqueued later at a higher priority or an earlier schedule, a released one, one a limit
woke. So a session walks from the head of the index (as before this version) whenever its
walk from the cursor finds nothing, and at least every REWALK_SECONDS; a job that belongs
before the cursor waits at most that long more than it would have, and never while the
session's claims would otherwise find nothing. A batch that finds fewer rows after the
cursor than it asked for comes back short rather than walking from the head for the rest
(which would cost a full walk whenever a batch outnumbers the ready jobs).

Each walk starts at (not after) the first row the last one returned: a row a probe returned
but the claim did not take (another type's row ranked first, a row a limit refused) is seen
again. Measured in bench/RESULTS.md ("Behind a held snapshot").
"""

from __future__ import annotations

from .limits import UNBLOCKED_READY
from .schema import ANY_TYPE, SETTINGS

# How long a session's walks may start at its cursor before one walks from the head again:
# the longest a job placed before the cursor waits for that session's claims beyond its
# turn. A walk from the head costs what every claim cost before (a millisecond or so per
# 10,000 jobs run behind a held snapshot), once a second per worker. A session may set its
# own (SET jobq.claim_rewalk_seconds = ...), as the tests do to pin which walk they see.
REWALK_SECONDS = 1.0
REWALK = (
    "coalesce(nullif(current_setting('jobq.claim_rewalk_seconds', true), ''), "
    f"'{REWALK_SECONDS}')::double precision"
)

# The probes' conditions: the ready rows of the claim's type, or of any unpaused type.
TYPED = "type = job_type"
UNPAUSED = f"{ANY_TYPE} AND NOT EXISTS (SELECT FROM jobq_paused p WHERE p.type = jobq_jobs.type)"

# A schedule in the cursor's setting, as whole microseconds since the epoch, and back: exact,
# and read the same whatever the session's DateStyle and TimeZone (a pooler may hand the
# setting to another client's session). Below 2^53, so the interval's product is exact.
MICROSECONDS = "(extract(epoch FROM {at}) * 1000000)::bigint"
AT = "timestamptz 'epoch' + {micros} * interval '1 microsecond'"

# One walk, in the ready indexes' order; {where} says where it starts.
WALK = (
    "SELECT id, priority, scheduled_at FROM jobq_jobs "
    f"WHERE {UNBLOCKED_READY} AND {{which}}{{where}} "
    "ORDER BY priority DESC, scheduled_at, id LIMIT how_many - taken FOR UPDATE SKIP LOCKED"
)
# From the cursor on, within its priority (a range scan that starts at the cursor's key),
# then the lower priorities (the index is led by the priority, descending).
FROM_CURSOR = " AND priority = at_priority AND (scheduled_at, id) >= (at_scheduled, at_id)"
BELOW_CURSOR = " AND priority < at_priority"


def walked(which: str, where: str, walk: str = WALK) -> str:
    """A loop that returns the rows of `walk` (WALK by default), counting them in `taken`,
    and keeps the first one's key in `first`."""
    return f"""
        FOR row IN {walk.format(which=which, where=where)} LOOP
            id := row.id; priority := row.priority; scheduled_at := row.scheduled_at;
            IF taken = 0 THEN
                first := concat_ws('|', row.priority, {MICROSECONDS.format(at="row.scheduled_at")},
                    row.id);
            END IF;
            taken := taken + 1;
            RETURN NEXT;
        END LOOP;"""


def cursor_probe(which: str, walk: str = WALK, mark: str = "") -> str:
    """The body of a probe for up to `how_many` ready rows where `which` holds: from the
    session's cursor for `place`, and from the head when that finds nothing, when there is
    no cursor yet, or when the last walk from the head is REWALK_SECONDS old. The cursor's
    setting holds 'priority|scheduled_at (MICROSECONDS)|id|epoch of the last walk from the
    head'. `walk` is WALK or another walk of the same index order; with `mark` (a variable),
    the setting begins with the mark and a '#', and a setting with another mark is no
    cursor (a place that several walks share)."""
    kept = "current_setting(place, true)"
    if mark:
        kept = (
            f"(SELECT CASE WHEN split_part(s, '#', 1) = {mark} THEN split_part(s, '#', 2) END "
            f"FROM {kept} AS s)"
        )
    marked = f"{mark} || '#' || " if mark else ""
    return f"""
        kept := {kept};
        IF coalesce(kept, '') <> '' THEN
            at_priority := split_part(kept, '|', 1)::smallint;
            at_scheduled := {AT.format(micros="split_part(kept, '|', 2)::bigint")};
            at_id := split_part(kept, '|', 3)::bigint;
            head_walk := split_part(kept, '|', 4)::double precision;
        END IF;
        clock := extract(epoch FROM clock_timestamp());
        IF head_walk IS NOT NULL AND clock - head_walk < {REWALK} THEN
            {walked(which, FROM_CURSOR, walk)}
            IF taken < how_many THEN
                {walked(which, BELOW_CURSOR, walk)}
            END IF;
        END IF;
        IF taken = 0 THEN
            head_walk := clock;
            {walked(which, "", walk)}
        END IF;
        IF first IS NULL THEN
            first := concat_ws('|', at_priority, {MICROSECONDS.format(at="at_scheduled")}, at_id);
        END IF;
        IF first <> '' THEN
            PERFORM set_config(place, {marked}first || '|' || head_walk, false);
        END IF;"""


# A claim's body: a walk of its type's or of any type's ready jobs, unless paused.
CLAIM_BODY = (
    "-- Asked for none, no walk: one from the head would reset its clock "
    + f"""without looking.
        IF how_many <= 0 THEN
            RETURN;
        ELSIF job_type IS NULL THEN
            {cursor_probe(UNPAUSED)}
        ELSIF NOT EXISTS (SELECT FROM jobq_paused p WHERE p.type = job_type) THEN
            {cursor_probe(TYPED)}
        END IF;"""
)
CLAIM_PLACE = "'jobq.claim_' || md5(coalesce('type:' || job_type, 'any'))"


def cursor_function(
    signature: str, declared: str = "", place: str = CLAIM_PLACE, body: str = CLAIM_BODY
) -> str:
    """A probe function: `signature` names it and its arguments (how_many, how many rows it
    returns, unless `declared` declares it); `place`, the name of its cursor's setting;
    `body`, its statements. The settings are the probes' (schema.py's and NO_JIT's: CREATE
    OR REPLACE sets them anew)."""
    return f"""
    CREATE OR REPLACE FUNCTION {signature}
    RETURNS TABLE (id bigint, priority smallint, scheduled_at timestamptz)
    LANGUAGE plpgsql VOLATILE
    {SETTINGS} SET jit = off
    AS $$
    #variable_conflict use_column
    DECLARE
        {declared}
        place text := {place};
        kept text;
        at_priority smallint;
        at_scheduled timestamptz;
        at_id bigint;
        head_walk double precision;
        clock double precision;
        taken integer := 0;
        first text;
        row record;
    BEGIN
        {body}
    END
    $$
"""


CLAIM_CURSORS: tuple[str, ...] = (
    cursor_function("jobq_next_ready(job_type text)", "how_many integer := 1;"),
    cursor_function("jobq_ready_many(job_type text, how_many integer)"),
)
