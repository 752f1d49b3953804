"""Whether a database holds the schema this jobq needs, asked before any work starts.

Without the check, a database nobody migrated shows up as each worker's failing claim, and
an SQLite DSN naming a file that does not exist creates it, empty. The check reads only, and
opens an embedded database without creating it.
"""

from __future__ import annotations

from .. import backends
from ..errors import ConfigurationError, NoSchema

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


def status(dsn: str) -> str:
    """Which version of the schema a database holds, and what `jobq migrate` would apply;
    read only."""
    have, need = versions(dsn)
    if have >= need:
        return f"the schema is current (version {have})"
    pending = f"version {need}" if have + 1 == need else f"versions {have + 1} to {need}"
    at = "no schema" if have == 0 else f"version {have}"
    return f"the database has {at}, this jobq has {need}: {pending} pending ({MIGRATE})"


def versions(dsn: str) -> tuple[int, int]:
    """The schema version a database holds (0 for none) and the one this jobq installs."""
    backend = backends.connect(dsn, create=False)
    try:
        return backend.schema_version(), len(backend.migrations)
    finally:
        backend.close()


def script(dsn: str, after: int | None = None, upto: int | None = None) -> str:
    """The SQL `jobq migrate` would run on this database, from version `after` (by default
    the one it holds) to `upto` (by default this jobq's), as a script for the database's own
    client (psql, mysql, sqlite3); nothing is run. The database is only read, for its kind
    and its version."""
    backend = backends.connect(dsn, create=False)
    try:
        last = len(backend.migrations)
        start = backend.schema_version() if after is None else after
        end = last if upto is None else upto
        if not 0 <= start <= end <= last:
            raise ConfigurationError(
                f"no migration from version {start} to {end}: this jobq's versions run from 1 "
                f"to {last}; pick --from and --to with 0 <= from <= to <= {last}"
            )
        delimiter = backend.script_delimiter
        lines = [f"-- jobq's schema for {backend.kind}, version {start} to {end}"]
        if delimiter != ";":
            lines.append(f"DELIMITER {delimiter}")
        # As they run, but for the leading blanks, which no database keeps: SQLite keeps a
        # table's or a trigger's text from its first word, trailing blanks included.
        statements = backend.script(start, end)
        lines += [f"{statement.lstrip()}{delimiter}" for statement in statements]
        if delimiter != ";":
            lines.append("DELIMITER ;")
        return "\n".join(lines) + "\n"
    finally:
        backend.close()


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
