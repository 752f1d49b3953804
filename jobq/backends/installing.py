"""Installing and upgrading jobq's schema: each backend's migrations, applied in order and
at most once, with the version recorded in the database."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar


class Installing(ABC):
    migrations: ClassVar[Sequence[Sequence[str]]]
    # Each backend's statements for the table recording the schema's version: creating it,
    # and asking (without writing anything) whether it exists.
    sql_create_versions: ClassVar[str]
    sql_versions_exist: ClassVar[str]
    # A script of the migrations for the database's own client (script()): what opens and
    # closes it, as install_lock() does, and what ends each statement. psql and sqlite3 read
    # `;` after a function's or a trigger's body; the mysql client needs another delimiter
    # around bodies that hold `;`.
    script_begin: ClassVar[tuple[str, ...]]
    script_end: ClassVar[tuple[str, ...]]
    script_delimiter: ClassVar[str] = ";"

    @abstractmethod
    @contextmanager
    def install_lock(self) -> Iterator[None]:
        """Serialise concurrent installs of one database."""
        yield

    def schema_version(self) -> int:
        """The version of jobq's schema in this database, 0 if it has none. Reads only, so
        it may be asked of a database the user has not migrated."""
        if not self.fetchone(self.sql_versions_exist)[0]:
            return 0
        return int(self.fetchone("SELECT max(version) FROM jobq_schema")[0] or 0)

    @classmethod
    @abstractmethod
    def is_missing_table(cls, error: BaseException) -> bool:
        """Whether a statement failed because one of jobq's tables does not exist."""

    @abstractmethod
    def record_version(self, version: int) -> None: ...

    def install(self) -> tuple[int, int]:
        """Apply the migrations not applied yet; returns (version before, version after)."""
        with self.install_lock():
            self.execute(self.sql_create_versions)
            current = self.schema_version()
            for version, statements in enumerate(self.migrations, start=1):
                if version <= current:
                    continue
                for statement in statements:
                    self.execute(statement)
                self.record_version(version)
        return current, len(self.migrations)

    def script(self, after: int, upto: int) -> Iterator[str]:
        """The statements install() runs to bring the schema from version `after` to `upto`,
        recording each version as it goes, between the same lock and transaction; for a
        reader or the database's own client to run instead of `jobq migrate`."""
        yield from self.script_begin
        yield self.sql_create_versions
        for version in range(after + 1, upto + 1):
            yield from self.migrations[version - 1]
            yield f"INSERT INTO jobq_schema (version) VALUES ({version:d})"
        yield from self.script_end

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    @abstractmethod
    def fetchone(self, sql: str, params: Any = None) -> Any: ...
