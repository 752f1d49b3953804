"""SQLite's way to read a payload's field for a search (see search.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..search import Search, json_path


class SqliteSearch(Search):
    # json_extract fails on a payload that is no JSON, so it is read only from one that
    # is; its true and false are 1 and 0, which PostgreSQL and MariaDB give as words.
    sql_payload_field = (
        "CASE WHEN json_valid(payload) THEN CASE json_type(payload, {path}) "
        "WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
        "ELSE CAST(json_extract(payload, {path}) AS TEXT) END END"
    )

    def payload_path(self, keys: Sequence[str]) -> Any:
        return json_path(keys)
