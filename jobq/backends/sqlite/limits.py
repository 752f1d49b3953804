"""SQLite's concurrency limits: the columns and table, and the triggers that admit or block
each claim of a limited job and wake blocked jobs as attempts of their key end.

SQLite runs one writer at a time, so each trigger's count is the database as it stands: no
key needs a lock. The triggers see every claim and ending, whichever statement makes them.
"""

from __future__ import annotations

from ...limits import CONCURRENCY, MAX_COUNT
from ..limits import PER_IN_FORCE, Limits, limited_work_statement, shared_statements
from .schema import NOW

ALLOWED = f"""(SELECT coalesce(l.override, l.declared) FROM jobq_limits l
    WHERE l.type = {{row}}.type AND l.name = '{CONCURRENCY}')"""

# Attempts of the row's key that hold a slot: in progress with a live lease. Rows claimed
# earlier in the same statement count too.
RUNNING = f"""(SELECT count(*) FROM jobq_jobs r WHERE r.type = {{row}}.type
    AND r.limit_key = {{row}}.limit_key AND r.status = 'in_progress' AND r.lease_until > {NOW})"""

LIMITS: tuple[str, ...] = (
    "ALTER TABLE jobq_jobs ADD COLUMN limit_key TEXT",
    "ALTER TABLE jobq_jobs ADD COLUMN blocked_on TEXT",
    "CREATE TABLE jobq_limits (type TEXT NOT NULL, name TEXT NOT NULL, declared INTEGER, "
    "override INTEGER, PRIMARY KEY (type, name))",
    "CREATE INDEX jobq_jobs_limit_running ON jobq_jobs (type, limit_key) "
    "WHERE status = 'in_progress' AND limit_key IS NOT NULL",
    "CREATE INDEX jobq_jobs_limit_blocked ON jobq_jobs "
    "(type, limit_key, priority DESC, scheduled_at, id) "
    "WHERE status = 'pending' AND blocked_on IS NOT NULL",
    # Over the limit: the job is marked blocked, which claims step over, and the claim leaves
    # the row alone (RAISE(IGNORE) drops this row's update and goes on with the statement's
    # next row).
    f"""
    CREATE TRIGGER jobq_limit_admit BEFORE UPDATE OF status ON jobq_jobs
    WHEN OLD.status = 'pending' AND NEW.status = 'in_progress' AND NEW.limit_key IS NOT NULL
      AND {ALLOWED.format(row="NEW")} <= {RUNNING.format(row="NEW")}
    BEGIN
        UPDATE jobq_jobs SET blocked_on = '{CONCURRENCY}' WHERE id = NEW.id;
        SELECT RAISE(IGNORE);
    END
    """,
    f"""
    CREATE TRIGGER jobq_limit_release AFTER UPDATE OF status ON jobq_jobs
    WHEN OLD.status = 'in_progress' AND NEW.status <> 'in_progress' AND OLD.limit_key IS NOT NULL
    BEGIN
        UPDATE jobq_jobs SET blocked_on = NULL WHERE id IN (
            SELECT b.id FROM jobq_jobs b WHERE b.type = OLD.type AND b.limit_key = OLD.limit_key
              AND b.status = 'pending' AND b.blocked_on IS NOT NULL
            ORDER BY b.priority DESC, b.scheduled_at, b.id
            LIMIT max(0, coalesce({ALLOWED.format(row="OLD")}, {MAX_COUNT})
                         - {RUNNING.format(row="OLD")}));
    END
    """,
)

# Blocked jobs leave the ready indexes, so that a claim's walk never steps over them (20,000
# blocked jobs ahead of a ready one took a claim from 0.8 to 6.9 ms). The probes already say
# `blocked_on IS NULL`, which SQLite needs to read a partial index; the names, which the
# probes force (INDEXED BY), stay.
BLOCKED_APART: tuple[str, ...] = (
    "DROP INDEX jobq_jobs_ready",
    "CREATE INDEX jobq_jobs_ready ON jobq_jobs (priority DESC, scheduled_at, id) "
    "WHERE status = 'pending' AND blocked_on IS NULL",
    "DROP INDEX jobq_jobs_ready_by_type",
    "CREATE INDEX jobq_jobs_ready_by_type ON jobq_jobs (type, priority DESC, scheduled_at, id) "
    "WHERE status = 'pending' AND blocked_on IS NULL",
)


class SqliteLimits(Limits):
    sql_declare_limit = """
        INSERT INTO jobq_limits (type, name, declared, declared_per)
        VALUES (:type, :name, :count, :per)
        ON CONFLICT (type, name) DO UPDATE
        SET declared = excluded.declared, declared_per = excluded.declared_per
        WHERE jobq_limits.declared IS NOT excluded.declared
            OR jobq_limits.declared_per IS NOT excluded.declared_per
    """
    sql_override_limit = """
        INSERT INTO jobq_limits (type, name, override, override_per)
        VALUES (:type, :name, :count, :per)
        ON CONFLICT (type, name) DO UPDATE
        SET override = excluded.override, override_per = excluded.override_per
    """
    # A raised limit must reach the jobs already blocked: all of the type's go back to the
    # ready index, and the claims block again those still over it.
    sql_unblock_type = """
        UPDATE jobq_jobs SET blocked_on = NULL
        WHERE type = :type AND status = 'pending' AND blocked_on IS NOT NULL
    """
    sql_limits, sql_lapsed_keys, sql_stranded_keys, sql_free_slots, sql_limit_of = (
        shared_statements(NOW, f"{NOW} - {PER_IN_FORCE}", ":type", ":key", ":id")
    )
    sql_limited_work = limited_work_statement(NOW, ":most")
    # One writer at a time, from BEGIN IMMEDIATE on: the transaction holds every key.
    sql_hold_key = "SELECT 1"
    sql_wake_key = """
        UPDATE jobq_jobs SET blocked_on = NULL WHERE id IN (
            SELECT b.id FROM jobq_jobs b WHERE b.type = :type AND b.limit_key = :key
              AND b.status = 'pending' AND b.blocked_on IS NOT NULL
            ORDER BY b.priority DESC, b.scheduled_at, b.id LIMIT :free)
    """
