"""MariaDB's way to read a payload's field for a search (see search.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..search import Search, json_path


class MysqlSearch(Search):
    # MariaDB's JSON_EXTRACT gives NULL (and a warning) for a payload that is no JSON, and
    # unquoted, true and false as words (JSON_VALUE gives no value for them). Compared as
    # bytes: the table's collation would take "ACME" for "acme", where the others do not.
    sql_payload_field = "CAST(JSON_UNQUOTE(JSON_EXTRACT(payload, {path})) AS BINARY)"

    def payload_path(self, keys: Sequence[str]) -> Any:
        return json_path(keys)
