"""MySQL's and MariaDB's events (see backends/events.py)."""

from __future__ import annotations

from ..events import Events
from .schema import NOW

# Keys compare byte for byte, as step names do.
EVENTS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS jobq_events (
        event_key  VARBINARY(767) NOT NULL PRIMARY KEY,
        payload    LONGTEXT NULL,
        emitted    BOOLEAN NOT NULL DEFAULT FALSE,
        emitted_at DATETIME(6) NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
    """,
    "ALTER TABLE jobq_jobs ADD COLUMN event_key VARBINARY(767) NULL, "
    "ADD KEY jobq_jobs_event_key (event_key)",
)


class MysqlEvents(Events):
    # The update locks a row that is there already; an insert locks the one it writes.
    sql_event_hold = """
        INSERT INTO jobq_events (event_key) VALUES (%(key)s)
        ON DUPLICATE KEY UPDATE event_key = event_key
    """
    sql_event_read = "SELECT emitted, payload FROM jobq_events WHERE event_key = %(key)s"
    sql_event_mark = f"""
        UPDATE jobq_jobs SET event_key = %(key)s
        WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
          AND lease_until > {NOW}
    """
    # MySQL assigns left to right, each seeing the ones before: `emitted` goes last.
    sql_emit = f"""
        INSERT INTO jobq_events (event_key, payload, emitted, emitted_at)
        VALUES (%(key)s, %(payload)s, TRUE, {NOW})
        ON DUPLICATE KEY UPDATE payload = IF(emitted, payload, VALUES(payload)),
            emitted_at = IF(emitted, emitted_at, VALUES(emitted_at)), emitted = TRUE
    """
    sql_emit_wake = f"""
        UPDATE jobq_jobs SET event_key = NULL, updated_at = {NOW},
            scheduled_at = IF(status = 'pending', {NOW}, scheduled_at)
        WHERE event_key = %(key)s
    """
    sql_event_rewake = f"""
        UPDATE jobq_jobs SET scheduled_at = {NOW}, updated_at = {NOW}
        WHERE id = %(id)s AND status = 'pending' AND event_key IS NULL
    """
    # As PostgreSQL's (postgresql/events.py); MySQL's own DELETE takes the LIMIT.
    sql_prune_events = f"""
        DELETE FROM jobq_events
        WHERE IF(emitted, emitted_at < DATE_SUB({NOW}, INTERVAL %(older_than)s MICROSECOND),
            NOT EXISTS (SELECT 1 FROM jobq_jobs
                    WHERE jobq_jobs.event_key = jobq_events.event_key))
        LIMIT %(batch)s
    """
    sql_wake_now = f"""
        UPDATE jobq_jobs SET scheduled_at = {NOW}, updated_at = {NOW}
        WHERE id = %(id)s AND status = 'pending' AND scheduled_at > {NOW}
    """
    sql_awaited = "SELECT event_key FROM jobq_jobs WHERE id = %(id)s"
