"""PostgreSQL's events (see backends/events.py)."""

from __future__ import annotations

from ..events import Events
from .schema import in_progress

EVENTS: tuple[str, ...] = (
    "CREATE TABLE jobq_events (event_key text PRIMARY KEY, payload text, "
    "emitted boolean NOT NULL DEFAULT false, emitted_at timestamptz)",
    "ALTER TABLE jobq_jobs ADD COLUMN event_key text",
    "CREATE INDEX jobq_jobs_event_key ON jobq_jobs (event_key) WHERE event_key IS NOT NULL",
)


class PostgresEvents(Events):
    # DO UPDATE, not DO NOTHING: it locks a row that is there already.
    sql_event_hold = """
        INSERT INTO jobq_events (event_key) VALUES (%(key)s)
        ON CONFLICT (event_key) DO UPDATE SET event_key = EXCLUDED.event_key
    """
    sql_event_read = "SELECT emitted, payload FROM jobq_events WHERE event_key = %(key)s"
    sql_event_mark = f"""
        UPDATE jobq_jobs SET event_key = %(key)s
        WHERE id = %(id)s AND token = %(token)s AND {in_progress()}
          AND lease_until > statement_timestamp()
    """
    sql_emit = """
        INSERT INTO jobq_events (event_key, payload, emitted, emitted_at)
        VALUES (%(key)s, %(payload)s, true, now())
        ON CONFLICT (event_key) DO UPDATE
        SET payload = EXCLUDED.payload, emitted = true, emitted_at = EXCLUDED.emitted_at
        WHERE NOT jobq_events.emitted
    """
    sql_emit_wake = """
        UPDATE jobq_jobs SET event_key = NULL, updated_at = now(),
            scheduled_at = CASE WHEN status = 'pending' THEN now() ELSE scheduled_at END
        WHERE event_key = %(key)s
    """
    sql_event_rewake = """
        UPDATE jobq_jobs SET scheduled_at = now(), updated_at = now()
        WHERE id = %(id)s AND status = 'pending' AND event_key IS NULL
    """
    # An emitted event's waiters took it when it came: kept for the retention window, for
    # waits still to come. A placeholder only serves the jobs marked as waiting for it.
    sql_prune_events = """
        DELETE FROM jobq_events WHERE event_key IN (
            SELECT event_key FROM jobq_events
            WHERE CASE WHEN emitted
                THEN emitted_at < now() - make_interval(secs => %(older_than)s)
                ELSE NOT EXISTS (SELECT 1 FROM jobq_jobs
                    WHERE jobq_jobs.event_key = jobq_events.event_key) END
            LIMIT %(batch)s
        )
    """
    sql_wake_now = """
        UPDATE jobq_jobs SET scheduled_at = now(), updated_at = now()
        WHERE id = %(id)s AND status = 'pending' AND scheduled_at > now()
    """
    sql_awaited = "SELECT event_key FROM jobq_jobs WHERE id = %(id)s"
