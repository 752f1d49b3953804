"""SQLite's events (see backends/events.py): one writer at a time orders them."""

from __future__ import annotations

from ..events import Events
from .schema import NOW

EVENTS: tuple[str, ...] = (
    "CREATE TABLE jobq_events (event_key TEXT PRIMARY KEY, payload TEXT, "
    "emitted INTEGER NOT NULL DEFAULT 0, emitted_at REAL) WITHOUT ROWID",
    "ALTER TABLE jobq_jobs ADD COLUMN event_key TEXT",
    "CREATE INDEX jobq_jobs_event_key ON jobq_jobs (event_key) WHERE event_key IS NOT NULL",
)


class SqliteEvents(Events):
    sql_event_hold = (
        "INSERT INTO jobq_events (event_key) VALUES (:key) ON CONFLICT (event_key) DO NOTHING"
    )
    sql_event_read = "SELECT emitted, payload FROM jobq_events WHERE event_key = :key"
    sql_event_mark = f"""
        UPDATE jobq_jobs SET event_key = :key
        WHERE id = :id AND token = :token AND status = 'in_progress' AND lease_until > {NOW}
    """
    sql_emit = f"""
        INSERT INTO jobq_events (event_key, payload, emitted, emitted_at)
        VALUES (:key, :payload, 1, {NOW})
        ON CONFLICT (event_key) DO UPDATE
        SET payload = excluded.payload, emitted = 1, emitted_at = excluded.emitted_at
        WHERE NOT emitted
    """
    sql_emit_wake = f"""
        UPDATE jobq_jobs SET event_key = NULL, updated_at = {NOW},
            scheduled_at = CASE WHEN status = 'pending' THEN {NOW} ELSE scheduled_at END
        WHERE event_key = :key
    """
    sql_event_rewake = f"""
        UPDATE jobq_jobs SET scheduled_at = {NOW}, updated_at = {NOW}
        WHERE id = :id AND status = 'pending' AND event_key IS NULL
    """
    # As PostgreSQL's (postgresql/events.py).
    sql_prune_events = f"""
        DELETE FROM jobq_events WHERE event_key IN (
            SELECT event_key FROM jobq_events
            WHERE CASE WHEN emitted THEN emitted_at < {NOW} - :older_than
                ELSE NOT EXISTS (SELECT 1 FROM jobq_jobs
                    WHERE jobq_jobs.event_key = jobq_events.event_key) END
            LIMIT :batch
        )
    """
    sql_wake_now = f"""
        UPDATE jobq_jobs SET scheduled_at = {NOW}, updated_at = {NOW}
        WHERE id = :id AND status = 'pending' AND scheduled_at > {NOW}
    """
    sql_awaited = "SELECT event_key FROM jobq_jobs WHERE id = :id"
