"""PostgreSQL's walks of a concurrency key's blocked jobs from a cursor in the session, as the
claims walk the ready indexes (cursors.py): the endings' wake-up and a batched
acknowledgement's successors start at the first blocked job their session's last walk of
the key found, not at the head of the key's blocked jobs.

Why. Each job of a key that was blocked and then woken or claimed leaves its entry in
jobq_jobs_limit_blocked; while a transaction holds an old snapshot, vacuum may not remove
those entries nor a walk mark them dead, and every walk for the key's next blocked jobs
stepped over all of them: 10,000 entries after 10,000 jobs of one key
(tests/integration/test_held_horizon_limits.py). The key's jobs leave in the index's order
(best first), so those entries lie before the place the last walk started.

The same bound on order as the claims': a walk that starts at the cursor cannot see a job
blocked since before it (a higher priority, an earlier schedule), so a session walks from
the head when its walk from the cursor finds nothing and at least every REWALK_SECONDS; such
a job waits at most that long beyond its turn, and a key's free slot is never left unfilled
while a blocked job of the key remains. A cursor is a hint, kept in one of FLOOR_PLACES
settings by the key's hash with the key it is for (limit_floors.py): a pooler, a key that
takes another's place, or a rolled-back walk only moves where a walk starts.

Not bounded: a key with no blocked job left reads, at each wake-up, every blocked job of the
key woken since the snapshot (the walk from the cursor finds nothing, and the walk from the
head must look), as before. The second pass of the endings' wake-up, which waits for rows a
concurrent claim holds, walks from the head as before; it runs only when the first pass left
a free slot unfilled.
"""

from __future__ import annotations

from .cursors import cursor_function, cursor_probe
from .limit_endings import ENDED_KEYS_NET, LEFT_UNFILLED, NOTHING_FREE, endings_function, wake
from .limit_floors import FLOOR_PLACES, SEQUENCE, counted
from .limits import RUNNING
from .schema import READY
from .successors import KEY_RUNNING, KEY_SUCCESSORS, KEY_SUCCESSORS_QUERY

# A walk of the key's blocked jobs in the index's order; {which} narrows it.
BLOCKED_WALK = (
    "SELECT id, priority, scheduled_at FROM jobq_jobs WHERE type = key_type "
    "AND limit_key = key AND status = 'pending' AND blocked_on IS NOT NULL AND {which}{where} "
    "ORDER BY priority DESC, scheduled_at, id LIMIT how_many - taken FOR UPDATE SKIP LOCKED"
)


def blocked_function(name: str, which: str) -> str:
    """A walk for up to how_many blocked jobs of a key where `which` holds, from the
    session's cursor for the key (cursors.cursor_probe)."""
    return cursor_function(
        f"{name}(key_type text, key text, how_many bigint)",
        f"mark text := md5(key_type || chr(31) || key) || ':' || '{SEQUENCE}'::regclass::oid;",
        f"'jobq.{name}_' || (hashtext(mark) & {FLOOR_PLACES - 1})",
        f"""IF how_many <= 0 THEN
            RETURN;
        END IF;
        {cursor_probe(which, BLOCKED_WALK, "mark")}""",
    )


# The endings' wake-up walks any blocked job; the successors, those ready to run.
WAKE_WALK = "jobq_key_blocked"
NEXT_WALK = "jobq_key_next_blocked"
DUE = READY.replace("status = 'pending' AND ", "")

# The wake-up's first pass and the successors' pick, each key's walk through its cursor.
OLD_WAKE_WALK = """SELECT b.id FROM jobq_jobs b WHERE b.type = u.type
                          AND b.limit_key = u.limit_key AND b.status = 'pending'
                          AND b.blocked_on IS NOT NULL
                        ORDER BY b.priority DESC, b.scheduled_at, b.id LIMIT greatest(u.room, 0)
                        FOR UPDATE SKIP LOCKED"""
NEW_WAKE_WALK = f"SELECT w.id FROM {WAKE_WALK}(u.type, u.limit_key, greatest(u.room, 0)) AS w"


def replaced(sql: str, old: str, new: str) -> str:
    """`sql` with `old` replaced by `new`, which must be there."""
    assert old in sql, "nothing to replace"
    return sql.replace(old, new)


WAKE_FIRST = replaced(wake("free", "SKIP LOCKED"), OLD_WAKE_WALK, NEW_WAKE_WALK)
ENDINGS = replaced(
    counted(
        endings_function("CREATE OR REPLACE", ENDED_KEYS_NET, LEFT_UNFILLED, NOTHING_FREE),
        "u",
        RUNNING.format(row="u"),
    ),
    wake("free", "SKIP LOCKED"),
    WAKE_FIRST,
)

OLD_NEXT_WALK = KEY_SUCCESSORS_QUERY[
    KEY_SUCCESSORS_QUERY.index("SELECT b.id, b.priority") : KEY_SUCCESSORS_QUERY.index(
        "FOR UPDATE SKIP LOCKED"
    )
    + len("FOR UPDATE SKIP LOCKED")
]
NEW_NEXT_WALK = (
    f"SELECT w.id, w.priority, w.scheduled_at FROM {NEXT_WALK}(k.type, k.limit_key, "
    f"greatest(a.count - {KEY_RUNNING}, 0)) AS w"
)
SUCCESSORS = counted(
    replaced(
        KEY_SUCCESSORS.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"),
        OLD_NEXT_WALK,
        NEW_NEXT_WALK,
    ),
    "k",
    KEY_RUNNING,
)

BLOCKED_CURSORS: tuple[str, ...] = (
    blocked_function(WAKE_WALK, "true"),
    blocked_function(NEXT_WALK, DUE),
    ENDINGS,
    SUCCESSORS,
)
