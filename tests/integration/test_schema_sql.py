"""The schema file checked in beside each backend (`jobq/backends/<kind>/schema.sql`) is what
replaying every migration on a real server of that kind leaves, as its dump tool prints it:
a reader can trust the file to be the schema in force."""

from __future__ import annotations

from tests.support.schema_sql import path_of, rendered


def test_the_checked_in_schema_file_is_what_the_migrations_leave(dsn: str, db_kind: str) -> None:
    expected = path_of(db_kind).read_text()
    assert rendered(db_kind, dsn) == expected, (
        f"{path_of(db_kind)} is stale: run `python -m tests.support.schema_sql`"
    )
