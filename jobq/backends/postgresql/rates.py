"""PostgreSQL's rate limits: the rate key column, the window's starts, and the trigger that
admits a claim of a rate-limited job only while its key's window has room.

A sliding window, kept as the log of the key's starts within it: no span of `per` seconds
ever holds more than `count` starts, where a fixed window would allow 2 x count across its
boundary. The trigger holds the key's row (as the concurrency trigger does, SKIP LOCKED), so
that two claims of one key never count the same window. A job over the rate is not claimed
and counts no attempt: it is scheduled again for the moment the window's oldest start
leaves it, so it waits outside the ready indexes until then.
"""

from __future__ import annotations

from ...limits import RATE
from .limits import BLOCKED_APART

# The rate in force, the operator's when set, as (count, seconds).
IN_FORCE = f"""SELECT coalesce(l.override, l.declared),
        CASE WHEN l.override IS NULL THEN l.declared_per ELSE l.override_per END
    INTO allowed, per FROM jobq_limits l WHERE l.type = NEW.type AND l.name = '{RATE}'"""

# The key's row, made if missing and locked; a key another claim holds refuses the claim.
HOLD = """INSERT INTO jobq_limit_keys (type, limit_key) VALUES (NEW.type, NEW.rate_key)
            ON CONFLICT DO NOTHING;
        PERFORM FROM jobq_limit_keys k WHERE k.type = NEW.type AND k.limit_key = NEW.rate_key
            FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN OLD;
        END IF;"""


def admit(create: str, hold: str) -> str:
    """The rate's trigger function: `hold` takes the key (or returns OLD, the claim
    refused), then the window is counted.

    After the concurrency trigger (triggers fire in name order), which may have refused the
    claim already: then NEW is pending and this one does not run."""
    return f"""
    {create} FUNCTION jobq_rate_admit() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        allowed integer;
        per double precision;
        started integer;
        oldest timestamptz;
    BEGIN
        {IN_FORCE};
        IF allowed IS NULL THEN
            RETURN NEW;
        END IF;
        {hold}
        DELETE FROM jobq_rate_starts WHERE type = NEW.type AND rate_key = NEW.rate_key
            AND started_at <= now() - make_interval(secs => per);
        SELECT count(*), min(started_at) INTO started, oldest FROM jobq_rate_starts
            WHERE type = NEW.type AND rate_key = NEW.rate_key;
        IF started >= allowed THEN
            NEW := OLD;
            NEW.scheduled_at := greatest(OLD.scheduled_at,
                                         oldest + make_interval(secs => per));
            RETURN NEW;
        END IF;
        INSERT INTO jobq_rate_starts (type, rate_key, started_at)
            VALUES (NEW.type, NEW.rate_key, now());
        RETURN NEW;
    END
    $$
"""


ADMIT = admit("CREATE", HOLD)

# Blocked jobs out of the ready indexes (limits.py), then the rate limits.
RATES: tuple[str, ...] = (
    *BLOCKED_APART,
    # No defaults: adding the columns rewrites no rows.
    "ALTER TABLE jobq_jobs ADD COLUMN rate_key text",
    "ALTER TABLE jobq_limits ADD COLUMN declared_per double precision, "
    "ADD COLUMN override_per double precision",
    "CREATE TABLE jobq_rate_starts (type text NOT NULL, rate_key text NOT NULL, "
    "started_at timestamptz NOT NULL)",
    "CREATE INDEX jobq_rate_starts_window ON jobq_rate_starts (type, rate_key, started_at)",
    ADMIT,
    "CREATE TRIGGER jobq_rate_admit BEFORE UPDATE OF status ON jobq_jobs FOR EACH ROW "
    "WHEN (OLD.status = 'pending' AND NEW.status = 'in_progress' "
    "AND NEW.rate_key IS NOT NULL) EXECUTE FUNCTION jobq_rate_admit()",
)
