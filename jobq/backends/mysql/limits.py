"""MySQL's and MariaDB's concurrency limits: the columns and tables, the trigger that admits
or blocks each claim of a limited job, and the wake-ups of blocked jobs.

The admitting trigger locks the key's row (SKIP LOCKED: a claim never waits on another's
key, so batches cannot deadlock; a job whose key is busy stays ready, unclaimed) and counts
the key's live attempts; under READ COMMITTED that count is a fresh read. A trigger may not
change the table its statement changes, so an attempt's ending cannot wake a blocked job
itself: its trigger records the key in jobq_limit_wakes, and the next claim wakes as many
blocked jobs of that key as it has free slots, holding the key's row as it counts.
"""

from __future__ import annotations

from ...limits import CONCURRENCY
from ..limits import PER_IN_FORCE, Limits, limited_work_statement, shared_statements
from .schema import NOW

KEY = "limit_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"

# A key's attempts holding a slot, counted as a locking read, for the admitting trigger. A
# trigger's plain reads share
# the read view its statement opened at its first read, before the key's row was locked, so
# they can miss an attempt another claim committed in between (seen: 3 running at limit
# 2). A locking read sees the newest committed rows, and waits for an ending in flight.
LIVE = f"""SELECT COUNT(*) INTO running FROM jobq_jobs r WHERE r.type = {{type}}
    AND r.limit_key = {{key}} AND r.status = 'in_progress' AND r.lease_until > {NOW}
    LOCK IN SHARE MODE"""

ALLOWED = f"""(SELECT COALESCE(l.override, l.declared) FROM jobq_limits l
    WHERE l.type = {{type}} AND l.name = '{CONCURRENCY}')"""

# What a refused claim leaves of the row: everything the claim set, as it was.
UNCLAIMED = """NEW.status = OLD.status, NEW.attempts = OLD.attempts,
                        NEW.token = OLD.token, NEW.lease_until = OLD.lease_until,
                        NEW.host = OLD.host, NEW.pid = OLD.pid, NEW.worker = OLD.worker,
                        NEW.updated_at = OLD.updated_at, NEW.started_at = OLD.started_at,
                        NEW.attempted_at = OLD.attempted_at"""

ADMIT = f"""
    CREATE TRIGGER jobq_limit_admit BEFORE UPDATE ON jobq_jobs FOR EACH ROW
    BEGIN
        DECLARE allowed INT DEFAULT NULL;
        DECLARE held INT DEFAULT NULL;
        DECLARE running INT DEFAULT 0;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET held = NULL;
        IF OLD.status = 'pending' AND NEW.status = 'in_progress'
           AND NEW.limit_key IS NOT NULL THEN
            SET allowed = {ALLOWED.format(type="NEW.type")};
            IF allowed IS NOT NULL THEN
                INSERT IGNORE INTO jobq_limit_keys (type, limit_key)
                    VALUES (NEW.type, NEW.limit_key);
                SELECT 1 INTO held FROM jobq_limit_keys
                    WHERE type = NEW.type AND limit_key = NEW.limit_key FOR UPDATE SKIP LOCKED;
                IF held IS NOT NULL THEN
                    {LIVE.format(type="NEW.type", key="NEW.limit_key")};
                END IF;
                IF held IS NULL OR running >= allowed THEN
                    SET {UNCLAIMED},
                        NEW.blocked_on = IF(held IS NULL, NULL, '{CONCURRENCY}');
                END IF;
            END IF;
        END IF;
    END
"""

RELEASE = """
    CREATE TRIGGER jobq_limit_release AFTER UPDATE ON jobq_jobs FOR EACH ROW
    BEGIN
        IF OLD.status = 'in_progress' AND NEW.status <> 'in_progress'
           AND OLD.limit_key IS NOT NULL THEN
            INSERT IGNORE INTO jobq_limit_wakes (type, limit_key)
                VALUES (OLD.type, OLD.limit_key);
        END IF;
    END
"""

LIMITS: tuple[str, ...] = (
    # One statement, so that it applies whole or not at all.
    """
    ALTER TABLE jobq_jobs
        ADD COLUMN limit_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
        ADD COLUMN blocked_on VARCHAR(32) NULL,
        ADD KEY jobq_jobs_limits (type, limit_key, status, blocked_on)
    """,
    """
    CREATE TABLE IF NOT EXISTS jobq_limits (
        type VARCHAR(255) NOT NULL, name VARCHAR(32) NOT NULL,
        declared INT NULL, override INT NULL, PRIMARY KEY (type, name)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
    """,
    f"""
    CREATE TABLE IF NOT EXISTS jobq_limit_keys (
        type VARCHAR(255) NOT NULL, {KEY}, PRIMARY KEY (type, limit_key)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
    """,
    f"""
    CREATE TABLE IF NOT EXISTS jobq_limit_wakes (
        type VARCHAR(255) NOT NULL, {KEY}, PRIMARY KEY (type, limit_key)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
    """,
    ADMIT,
    RELEASE,
)

# The type's and key's placeholders.
MARKS = ("%(type)s", "%(key)s", "%(id)s")

# Wake-ups a claim takes on before it probes: a few, so that a claim stays short.
WAKES_A_CLAIM = 8


class MysqlLimits(Limits):
    sql_declare_limit = """
        INSERT INTO jobq_limits (type, name, declared, declared_per)
        VALUES (%(type)s, %(name)s, %(count)s, %(per)s)
        ON DUPLICATE KEY UPDATE declared = VALUES(declared), declared_per = VALUES(declared_per)
    """
    sql_override_limit = """
        INSERT INTO jobq_limits (type, name, override, override_per)
        VALUES (%(type)s, %(name)s, %(count)s, %(per)s)
        ON DUPLICATE KEY UPDATE override = VALUES(override), override_per = VALUES(override_per)
    """
    # A raised limit must reach the jobs already blocked: all of the type's go back to the
    # ready index, and the claims block again those still over it.
    sql_unblock_type = """
        UPDATE jobq_jobs SET blocked_on = NULL
        WHERE type = %(type)s AND status = 'pending' AND blocked_on IS NOT NULL
    """
    sql_limits, sql_lapsed_keys, sql_stranded_keys, sql_free_slots, sql_limit_of = (
        shared_statements(
            NOW, f"DATE_SUB({NOW}, INTERVAL ({PER_IN_FORCE}) * 1000000 MICROSECOND)", *MARKS
        )
    )
    sql_limited_work = limited_work_statement(NOW, "%(most)s")
    # SKIP LOCKED: a claim holding the key may wait (its locking count) on an ending whose
    # wake-up row this transaction holds; the key's next claim wakes it instead.
    sql_hold_key = """
        SELECT 1 FROM jobq_limit_keys WHERE type = %(type)s AND limit_key = %(key)s
        FOR UPDATE SKIP LOCKED
    """
    sql_wake_key = """
        UPDATE jobq_jobs SET blocked_on = NULL WHERE type = %(type)s
          AND limit_key = %(key)s AND status = 'pending' AND blocked_on IS NOT NULL
        ORDER BY priority DESC, scheduled_at, id LIMIT %(free)s
    """

    def wake_blocked(self) -> None:
        """Wake the jobs that the attempts ended since the last claim freed slots for: per
        key, in a transaction that holds the key's row as it counts, so that no claim
        blocks a job of that key in between unseen."""
        if self.fetchone("SELECT 1 FROM jobq_limit_wakes LIMIT 1") is None:
            return
        with self.transaction():
            keys = self.fetchall(
                "SELECT type, limit_key FROM jobq_limit_wakes "
                f"LIMIT {WAKES_A_CLAIM} FOR UPDATE SKIP LOCKED"
            )
            for job_type, key in keys:
                self.wake_key({"type": job_type, "key": key})
                self.execute(
                    "DELETE FROM jobq_limit_wakes WHERE type = %(type)s AND limit_key = %(key)s",
                    {"type": job_type, "key": key},
                )

    def claimed_ids(self, ids: list[int]) -> set[int]:
        """Of rows a claim just updated, those it claimed: the trigger leaves a refused one
        pending."""
        marks = ", ".join(["%s"] * len(ids))
        rows = self.fetchall(
            f"SELECT id FROM jobq_jobs WHERE id IN ({marks}) AND status = 'in_progress'", ids
        )
        return {int(row[0]) for row in rows}
