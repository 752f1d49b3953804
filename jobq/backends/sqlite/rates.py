"""SQLite's rate limits: the rate key column, the window's starts, and the triggers that
admit a claim of a rate-limited job only while its key's window has room and record each
start (see jobq/backends/postgresql/rates.py for the sliding window). SQLite runs one writer
at a time, so the count is the database as it stands: no key needs a lock.
"""

from __future__ import annotations

from ...limits import RATE
from .limits import BLOCKED_APART
from .schema import NOW

# The rate in force, the operator's when set: its count, and its window in seconds.
ALLOWED = f"""(SELECT coalesce(l.override, l.declared) FROM jobq_limits l
    WHERE l.type = NEW.type AND l.name = '{RATE}')"""
PER = f"""(SELECT CASE WHEN l.override IS NULL THEN l.declared_per ELSE l.override_per END
    FROM jobq_limits l WHERE l.type = NEW.type AND l.name = '{RATE}')"""
IN_WINDOW = f"""FROM jobq_rate_starts s WHERE s.type = NEW.type AND s.rate_key = NEW.rate_key
    AND s.started_at > {NOW} - {PER}"""

CLAIMED = "OLD.status = 'pending' AND NEW.status = 'in_progress' AND NEW.rate_key IS NOT NULL"

# Blocked jobs out of the ready indexes (limits.py), then the rate limits.
RATES: tuple[str, ...] = (
    *BLOCKED_APART,
    "ALTER TABLE jobq_jobs ADD COLUMN rate_key TEXT",
    "ALTER TABLE jobq_limits ADD COLUMN declared_per REAL",
    "ALTER TABLE jobq_limits ADD COLUMN override_per REAL",
    "CREATE TABLE jobq_rate_starts (type TEXT NOT NULL, rate_key TEXT NOT NULL, "
    "started_at REAL NOT NULL)",
    "CREATE INDEX jobq_rate_starts_window ON jobq_rate_starts (type, rate_key, started_at)",
    # Over the rate: the job is scheduled again for when the window's oldest start leaves
    # it, and the claim leaves the row alone (RAISE(IGNORE)), counting no attempt.
    f"""
    CREATE TRIGGER jobq_rate_admit BEFORE UPDATE OF status ON jobq_jobs
    WHEN {CLAIMED} AND {ALLOWED} <= (SELECT count(*) {IN_WINDOW})
    BEGIN
        UPDATE jobq_jobs SET scheduled_at = max(scheduled_at,
            (SELECT min(s.started_at) {IN_WINDOW}) + {PER}) WHERE id = NEW.id;
        SELECT RAISE(IGNORE);
    END
    """,
    f"""
    CREATE TRIGGER jobq_rate_start AFTER UPDATE OF status ON jobq_jobs
    WHEN {CLAIMED} AND {ALLOWED} IS NOT NULL
    BEGIN
        DELETE FROM jobq_rate_starts WHERE type = NEW.type AND rate_key = NEW.rate_key
            AND started_at <= {NOW} - {PER};
        INSERT INTO jobq_rate_starts (type, rate_key, started_at)
            VALUES (NEW.type, NEW.rate_key, {NOW});
    END
    """,
)
