"""Whether a database holds the schema this jobq needs, asked before any work starts.

Without the check, a database nobody migrated shows up as each worker's failing claim, and
an SQLite DSN naming a file that does not exist creates it, empty. The check reads only, and
opens an embedded database without creating it.
"""

from __future__ import annotations

from .. import backends
from ..errors import NoSchema

MIGRATE = "run `jobq migrate`"


def describe(before: int, after: int) -> str:
    """What an install did, from the versions it returns."""
    if before == 0:
        return f"created the schema (version {after})"
    if before < after:
        return f"upgraded the schema from version {before} to {after}"
    return f"the schema is already current (version {after})"


def require(dsn: str) -> None:
    """Raise NoSchema, saying what to run, unless the database has jobq's current schema.
    A newer schema passes: migrations only add, so this jobq's statements still work."""
    try:
        backend = backends.connect(dsn, create=False)
    except NoSchema as error:
        raise NoSchema(f"{error}: {MIGRATE} to create it") from None
    try:
        have, need = backend.schema_version(), len(backend.migrations)
    finally:
        backend.close()
    if have == 0:
        raise NoSchema(f"the database has no jobq schema: {MIGRATE} to create it")
    if have < need:
        raise NoSchema(
            f"the database has jobq's schema version {have}, this jobq needs version {need}: "
            f"{MIGRATE} to upgrade it"
        )


def migrate(dsn: str) -> str:
    """Create or upgrade the schema; what was done."""
    backend = backends.connect(dsn)
    try:
        return describe(*backend.install())
    finally:
        backend.close()


def hint(dsn: str, error: BaseException) -> str:
    """Advice to append to a database error's message: the fix when it came from a missing
    table (the schema was dropped, or never created), else nothing."""
    try:
        missing = backends.for_dsn(dsn).is_missing_table(error)
    except Exception:
        return ""
    return f" (the database has no jobq schema: {MIGRATE})" if missing else ""
