"""MySQL's and MariaDB's rate limits: the rate key column, the window's starts, and the
trigger that admits a claim of a rate-limited job only while its key's window has room,
recording the start (see jobq/backends/postgresql/rates.py for the sliding window). It holds
the key's row as the concurrency trigger does, and counts the starts with a locking read, so
that it sees those another claim of the key committed just before."""

from __future__ import annotations

from ...limits import RATE
from .limits import KEY, UNCLAIMED
from .schema import NOW

WINDOW = f"DATE_SUB({NOW}, INTERVAL per * 1000000 MICROSECOND)"

# After the concurrency trigger (FOLLOWS), which may have refused the claim already: then
# NEW is pending and this one does nothing. Over the rate, the job is scheduled again for
# when the window's oldest start leaves it, and the claim leaves the row as it was.
ADMIT = f"""
    CREATE TRIGGER jobq_rate_admit BEFORE UPDATE ON jobq_jobs FOR EACH ROW
    FOLLOWS jobq_limit_admit
    BEGIN
        DECLARE allowed INT DEFAULT NULL;
        DECLARE per DOUBLE DEFAULT NULL;
        DECLARE held INT DEFAULT NULL;
        DECLARE started INT DEFAULT 0;
        DECLARE oldest DATETIME(6) DEFAULT NULL;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET held = NULL;
        IF OLD.status = 'pending' AND NEW.status = 'in_progress'
           AND NEW.rate_key IS NOT NULL THEN
            SELECT COALESCE(l.override, l.declared),
                   IF(l.override IS NULL, l.declared_per, l.override_per)
                INTO allowed, per FROM jobq_limits l
                WHERE l.type = NEW.type AND l.name = '{RATE}';
            IF allowed IS NOT NULL THEN
                INSERT IGNORE INTO jobq_limit_keys (type, limit_key)
                    VALUES (NEW.type, NEW.rate_key);
                SELECT 1 INTO held FROM jobq_limit_keys
                    WHERE type = NEW.type AND limit_key = NEW.rate_key FOR UPDATE SKIP LOCKED;
                IF held IS NOT NULL THEN
                    SELECT COUNT(*), MIN(started_at) INTO started, oldest
                        FROM jobq_rate_starts WHERE type = NEW.type
                        AND rate_key = NEW.rate_key AND started_at > {WINDOW}
                        LOCK IN SHARE MODE;
                END IF;
                IF held IS NULL OR started >= allowed THEN
                    SET {UNCLAIMED},
                        NEW.scheduled_at = IF(held IS NULL, OLD.scheduled_at, GREATEST(
                            OLD.scheduled_at,
                            DATE_ADD(oldest, INTERVAL per * 1000000 MICROSECOND)));
                ELSE
                    DELETE FROM jobq_rate_starts WHERE type = NEW.type
                        AND rate_key = NEW.rate_key AND started_at <= {WINDOW};
                    INSERT INTO jobq_rate_starts (type, rate_key, started_at)
                        VALUES (NEW.type, NEW.rate_key, {NOW});
                END IF;
            END IF;
        END IF;
    END
"""

RATES: tuple[str, ...] = (
    # Blocked jobs move out of the ready part of the ready indexes: MySQL has no partial
    # index, so blocked_on follows the status (and type), and the probes, which say
    # `blocked_on IS NULL`, walk only the unblocked rows, in order. The names stay, which
    # the probes force (FORCE INDEX): a worker of the previous release, mid-upgrade, still
    # finds them. One statement with the rate key, so that it applies whole or not at all.
    """
    ALTER TABLE jobq_jobs
        DROP KEY jobq_jobs_ready,
        ADD KEY jobq_jobs_ready (status, blocked_on, priority DESC, scheduled_at, id),
        DROP KEY jobq_jobs_ready_by_type,
        ADD KEY jobq_jobs_ready_by_type (status, type, blocked_on, priority DESC, scheduled_at, id),
        ADD COLUMN rate_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL
    """,
    "ALTER TABLE jobq_limits ADD COLUMN declared_per DOUBLE NULL, "
    "ADD COLUMN override_per DOUBLE NULL",
    f"""
    CREATE TABLE IF NOT EXISTS jobq_rate_starts (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, type VARCHAR(255) NOT NULL,
        {KEY.replace("limit_key", "rate_key")}, started_at DATETIME(6) NOT NULL,
        KEY jobq_rate_starts_window (type, rate_key, started_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
    """,
    ADMIT,
)
